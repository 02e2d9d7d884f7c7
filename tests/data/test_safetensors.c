/* safetensors: the committed fixture written by make_safetensors_fixture.py (every dtype
 * converted), write/read round trips, and every kind of malformed file. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cl/base/half.h"
#include "engine/io/safetensors.h"
#include "tests/data/testutil.h"

#ifndef CLP_TEST_SRC_DIR
#error "CLP_TEST_SRC_DIR must name tests/data"
#endif

static void test_fixture(void)
{
	clp_st_file *f = NULL;
	const clp_st_tensor *t;
	float x[8];
	int64_t k[4];

	CHECK_OK(clp_st_open(&f, CLP_TEST_SRC_DIR "/fixtures/small.safetensors"));
	if (!f)
		return;
	CHECK(clp_st_count(f) == 7, "count %d", clp_st_count(f));
	CHECK(clp_st_meta(f, "note") && !strcmp(clp_st_meta(f, "note"), "clpipe fixture"), "meta");
	CHECK(clp_st_meta_count(f) == 2, "meta count");
	t = clp_st_find(f, "weight.f32");
	CHECK(t && t->dtype == CLP_ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3,
	      "weight header");
	if (t) {
		CHECK_OK(clp_st_read_f32(f, t, x));
		CHECK(x[0] == 1.0f && x[1] == -2.5f && x[2] == 3.25f && x[3] == 0.0f &&
		      x[4] == 1e-3f && x[5] == -1e10f, "weight values");
	}
	if ((t = clp_st_find(f, "half.f16"))) {
		CHECK_OK(clp_st_read_f32(f, t, x));
		CHECK(x[0] == 1.0f && x[1] == -2.0f && x[2] == 0.5f && x[3] == 65504.0f, "f16 values");
	}
	if ((t = clp_st_find(f, "brain.bf16"))) {
		CHECK_OK(clp_st_read_f32(f, t, x));
		CHECK(x[0] == 1.0f && x[1] == -3.5f && x[2] == 0.15625f, "bf16 values");
		CHECK_ERR(clp_st_read_i64(f, t, k), CLP_ERR_UNSUPPORTED, "brain.bf16", "BF16");
	}
	if ((t = clp_st_find(f, "steps.i64"))) {
		CHECK_OK(clp_st_read_i64(f, t, k));
		CHECK(k[0] == -(INT64_C(1) << 40) && k[1] == 7, "i64 values");
		CHECK_ERR(clp_st_read_f32(f, t, x), CLP_ERR_UNSUPPORTED, "steps.i64", "I64");
	}
	if ((t = clp_st_find(f, "ids.i32"))) {
		CHECK_OK(clp_st_read_i64(f, t, k));
		CHECK(k[0] == -1 && k[1] == 0 && k[2] == INT32_MAX, "i32 values");
	}
	t = clp_st_find(f, "empty.f32");
	CHECK(t && t->numel == 0 && t->ndim == 2, "empty tensor");
	t = clp_st_find(f, "scalar.f32");
	CHECK(t && t->numel == 1 && t->ndim == 0, "scalar");
	if (t) {
		CHECK_OK(clp_st_read_f32(f, t, x));
		CHECK(x[0] == 42.0f, "scalar value");
	}
	CHECK(clp_st_find(f, "nope") == NULL, "missing name");
	clp_st_close(f);
}

static void test_half_conversions(void)
{
	CHECK(clp_f16_value(0x3c00) == 1.0f && clp_f16_value(0xc000) == -2.0f, "f16 normal");
	CHECK(clp_f16_value(0x0001) == ldexpf(1, -24), "f16 smallest subnormal");
	CHECK(clp_f16_value(0x7c00) == INFINITY && isnan(clp_f16_value(0x7e00)), "f16 inf/nan");
	CHECK(signbit(clp_f16_value(0x8000)), "f16 -0");
	CHECK(clp_bf16_value(0x3f80) == 1.0f && clp_bf16_value(0xc060) == -3.5f, "bf16");
}

static void test_round_trip(void)
{
	float a[6] = {1, 2, 3, 4, 5, 6}, b[1] = {7}, back[6];
	int64_t sa[2] = {2, 3}, sz[1] = {0};
	clp_st_writer *w = NULL;
	clp_st_file *f = NULL;
	uint64_t size = 0;
	uint32_t crc = 0, crc2;
	uint64_t size2;
	const char *p = tu_path("rt.safetensors");

	CHECK_OK(clp_st_writer_create(&w, p));
	if (!w)
		return;
	CHECK_OK(clp_st_writer_add(w, "h.0.attn.c_attn.weight", a, 2, sa));
	CHECK_OK(clp_st_writer_add(w, "scalar", b, 0, NULL));
	CHECK_OK(clp_st_writer_add(w, "nothing", NULL, 1, sz));
	CHECK_ERR(clp_st_writer_add(w, "scalar", b, 0, NULL), CLP_ERR_INVALID, "scalar", "twice");
	CHECK_ERR(clp_st_writer_add(w, "__metadata__", b, 0, NULL), CLP_ERR_INVALID,
		  "__metadata__");
	CHECK_OK(clp_st_writer_meta(w, "format", "pt"));
	CHECK_OK(clp_st_writer_meta(w, "config", "[model]\nn_layer = 2\n\"quoted\"\n"));
	CHECK_OK(clp_st_writer_finish(w, &size, &crc));
	clp_st_writer_free(w);
	CHECK_OK(clp_io_crc32_file(p, &crc2, &size2));
	CHECK(size == size2 && crc == crc2, "reported size/crc match the file");
	CHECK(access(tu_path("rt.safetensors.tmp"), F_OK) != 0, "temporary left behind");
	CHECK_OK(clp_st_open(&f, p));
	if (!f)
		return;
	{
		FILE *fp = fopen(p, "rb");
		unsigned char l8[8];
		uint64_t hl = 0;

		CHECK(fp && fread(l8, 1, 8, fp) == 8, "read length");
		for (int i = 7; i >= 0; i--)
			hl = hl << 8 | l8[i];
		CHECK(hl % 8 == 0, "header length %llu is not padded to 8", (unsigned long long)hl);
		if (fp)
			fclose(fp);
	}
	CHECK(clp_st_count(f) == 3, "count");
	CHECK(!strcmp(clp_st_meta(f, "config"), "[model]\nn_layer = 2\n\"quoted\"\n"), "meta text");
	memset(back, 0, sizeof(back));
	CHECK_OK(clp_st_read_f32(f, clp_st_find(f, "h.0.attn.c_attn.weight"), back));
	CHECK(!memcmp(a, back, sizeof(a)), "data");
	CHECK_OK(clp_st_read_f32(f, clp_st_find(f, "scalar"), back));
	CHECK(back[0] == 7, "scalar");
	clp_st_close(f);
}

/* 16-bit tensors: written as BF16 / F16 words (odd element counts: no padding between
 * tensors), read back as the same values, the header naming each dtype. */
static void test_round_trip_16(void)
{
	float src[7] = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f, -0.0f, 1e-7f}, back[7];
	uint16_t hb[7], hf[7];
	int64_t shape[1] = {7};
	clp_st_writer *w = NULL;
	clp_st_file *f = NULL;
	const clp_st_tensor *tb, *tf;
	const char *p = tu_path("rt16.safetensors");

	clp_dtype_pack(CLP_BF16, hb, src, 7);
	clp_dtype_pack(CLP_F16, hf, src, 7);
	CHECK_OK(clp_st_writer_create(&w, p));
	if (!w)
		return;
	CHECK_OK(clp_st_writer_add16(w, "b", CLP_ST_BF16, hb, 1, shape));
	CHECK_OK(clp_st_writer_add16(w, "h", CLP_ST_F16, hf, 1, shape));
	CHECK_OK(clp_st_writer_add(w, "f", src, 1, shape));
	CHECK_ERR(clp_st_writer_add16(w, "x", CLP_ST_F32, hf, 1, shape), CLP_ERR_INVALID, "\"x\"",
		  "BF16 or F16");
	CHECK_OK(clp_st_writer_finish(w, NULL, NULL));
	clp_st_writer_free(w);
	CHECK_OK(clp_st_open(&f, p));
	if (!f)
		return;
	tb = clp_st_find(f, "b");
	tf = clp_st_find(f, "h");
	CHECK(tb && tb->dtype == CLP_ST_BF16 && tb->end - tb->begin == 14, "BF16 tensor");
	CHECK(tf && tf->dtype == CLP_ST_F16 && tf->end - tf->begin == 14, "F16 tensor");
	if (tb && tf) {
		CHECK_OK(clp_st_read_f32(f, tb, back));
		for (int i = 0; i < 7; i++)
			CHECK(back[i] == clp_dtype_round(CLP_BF16, src[i]), "bf16[%d]: %g", i,
			      (double)back[i]);
		CHECK_OK(clp_st_read_f32(f, tf, back));
		for (int i = 0; i < 7; i++)
			CHECK(back[i] == clp_dtype_round(CLP_F16, src[i]), "f16[%d]: %g", i,
			      (double)back[i]);
		CHECK_OK(clp_st_read_f32(f, clp_st_find(f, "f"), back));
		CHECK(!memcmp(back, src, sizeof(src)), "F32 after 16-bit tensors");
	}
	clp_st_close(f);
}

/* A file from a header text and data_len bytes of data. */
static void raw(const char *path, const char *header, size_t data_len)
{
	size_t hl = strlen(header);
	unsigned char *buf = calloc(1, 8 + hl + data_len);

	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(buf + 8, header, hl);
	tu_write(path, buf, 8 + hl + data_len);
	free(buf);
}

static void test_errors(void)
{
	clp_st_file *f = NULL;
	char p[1024];
	unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, '{', '}'};

	snprintf(p, sizeof(p), "%s", tu_path("bad.safetensors"));
	CHECK_ERR(clp_st_open(&f, tu_path("none.safetensors")), CLP_ERR_NOT_FOUND,
		  "none.safetensors");
	tu_write(p, "", 0);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "empty");
	tu_write(p, "abc", 3);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "truncated", "8-byte");
	tu_write(p, huge, 10);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "implausible");
	huge[0] = 100;
	huge[1] = huge[2] = huge[3] = huge[4] = 0;
	tu_write(p, huge, 16);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "truncated",
		  "header length is 100");
	raw(p, "GARBAGE!", 0);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "'{'");
	raw(p, "{\"a\": {\"dtype\": \"F32\",", 0);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "malformed");
	raw(p, "{\"a\": {\"dtype\": \"Q7\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "\"a\"", "Q7");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "\"a\"", "shape[0]");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "\"a\"", "8 bytes", "hold 4");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 6);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "truncated", "\"a\"");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
	       "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "overlap", "\"a\"", "\"b\"");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "\"a\"", "end before");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 8);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "\"a\"", "data_offsets");
	raw(p, "{\"__metadata__\": {\"k\": 5}}", 0);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "__metadata__", "\"k\"");
	raw(p, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
	       "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4);
	CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "malformed");
	/* a file cut short after a valid write */
	{
		float a[100] = {0};
		int64_t s[1] = {100};
		clp_st_writer *w = NULL;

		CHECK_OK(clp_st_writer_create(&w, p));
		if (w) {
			CHECK_OK(clp_st_writer_add(w, "big", a, 1, s));
			CHECK_OK(clp_st_writer_finish(w, NULL, NULL));
			clp_st_writer_free(w);
		}
		tu_truncate(p, 1);
		CHECK_ERR(clp_st_open(&f, p), CLP_ERR_FORMAT, "bad.safetensors", "truncated", "big");
	}
	CHECK(f == NULL, "no handle after errors");
}

TH_MAIN(TH_TEST(test_fixture), TH_TEST(test_half_conversions), TH_TEST(test_round_trip),
	TH_TEST(test_round_trip_16),
	TH_TEST(test_errors))
