/* What a file given as text really is: an llm.c token shard, a safetensors file, a compressed
 * archive or other binary data (over a tenth of the first 4 KiB control characters) are refused
 * by name (with the setting that reads them), instead
 * of training on their bytes. */
#ifndef CLP_DATA_SNIFF_H
#define CLP_DATA_SNIFF_H

#include "cl/base/status.h"

/* CLP_OK for text (or an unreadable file: the reader reports that); else CLP_ERR_FORMAT naming
 * what the first bytes show. */
clp_status clp_data_sniff_text(const char *path);

#endif
