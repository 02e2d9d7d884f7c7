/* Shared by checkpoint_write.c and checkpoint_read.c: names and directory listing. */
#ifndef CLP_IO_CHECKPOINT_INTERNAL_H
#define CLP_IO_CHECKPOINT_INTERNAL_H

#include "engine/io/checkpoint.h"

#define CLP_CKPT_MANIFEST "manifest.json"
#define CLP_CKPT_FORMAT "clpipe-checkpoint"
#define CLP_CKPT_VERSION 1

/* "model.safetensors" or "model-rank<R>.safetensors" (and optimizer). */
void clp_ckpt_file_name(char *buf, size_t cap, clp_ckpt_kind kind, int rank, int nranks);
const char *clp_ckpt_kind_name(clp_ckpt_kind kind);

/* malloc()ed "a/b". */
char *clp_ckpt_join(const char *a, const char *b);

#endif
