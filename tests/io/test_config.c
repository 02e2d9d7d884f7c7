/* The config format: parsing, overrides, printing round trips, and errors that name the file,
 * line and field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/io/config.h"
#include "engine/train/train_config.h"
#include "tests/harness.h"

struct demo {
	long n_layer;
	double lr;
	int tied;
	char preset[16];
	char data[256];
	clp_cfg_ints split;
};

#define F(member, key, type, dflt, help, lo, hi, ch)                                               \
	CLP_CFG_FIELD(struct demo, member, key, type, dflt, help, lo, hi, ch)
static const clp_cfg_field fields[] = {
	F(n_layer, "model.n_layer", CLP_CFG_INT, "12", "layers", 1, 1000, NULL),
	F(preset, "model.preset", CLP_CFG_STRING, "\"gpt2\"", "preset", 0, 0, "gpt2|llama|bert"),
	F(tied, "model.tied", CLP_CFG_BOOL, "true", "tied embeddings", 0, 0, NULL),
	F(lr, "optim.lr", CLP_CFG_FLOAT, "3e-4", "learning rate", 0, 10, NULL),
	F(data, "data.path", CLP_CFG_STRING, "\"\"", "corpus", 0, 0, NULL),
	F(split, "pipeline.layers", CLP_CFG_INTS, "[]", "layers per stage", 0, 1000, NULL),
};
static const clp_cfg_schema schema = {"demo", fields, sizeof(fields) / sizeof(fields[0]), 0};

static void test_defaults_and_file(void)
{
	struct demo d;
	const char *text = "# a comment\n"
			   "[model]\n"
			   "n_layer = 4   # trailing comment\n"
			   "preset = \"llama\"\n"
			   "\n"
			   "[optim]\n"
			   "lr = 1.5e-3\n"
			   "[data]\n"
			   "path = \"/tmp/a # not a comment.txt\"\n";

	memset(&d, 0x55, sizeof(d));
	CHECK_OK(clp_cfg_defaults(&schema, &d));
	CHECK(d.n_layer == 12 && d.lr == 3e-4 && d.tied == 1 && !strcmp(d.preset, "gpt2") &&
	      d.data[0] == '\0' && d.split.n == 0, "defaults");
	CHECK_OK(clp_cfg_load_string(&schema, &d, text, "demo.toml"));
	CHECK(d.n_layer == 4, "n_layer %ld", d.n_layer);
	CHECK(!strcmp(d.preset, "llama"), "preset %s", d.preset);
	CHECK(d.lr == 1.5e-3, "lr %g", d.lr);
	CHECK(!strcmp(d.data, "/tmp/a # not a comment.txt"), "data %s", d.data);
	/* a dotted key inside [data] is data.pipeline.layers: unknown */
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[data]\npipeline.layers = [1]\n", "x.toml"),
		  CLP_ERR_INVALID, "x.toml:2", "data.pipeline.layers");
	CHECK_OK(clp_cfg_load_string(&schema, &d, "pipeline.layers = [3, 3, 2]\n", "y.toml"));
	CHECK(d.split.n == 3 && d.split.v[0] == 3 && d.split.v[2] == 2, "list %d", d.split.n);
}

static void test_round_trip(void)
{
	struct demo a, b;
	char *text;

	CHECK_OK(clp_cfg_defaults(&schema, &a));
	CHECK_OK(clp_cfg_set(&schema, &a, "optim.lr", "0.1", "test"));
	CHECK_OK(clp_cfg_set(&schema, &a, "data.path", "\"quote \\\" and \\\\ back\"", "test"));
	CHECK_OK(clp_cfg_set(&schema, &a, "pipeline.layers", "[1,2, 3]", "test"));
	CHECK_OK(clp_cfg_set(&schema, &a, "model.tied", "false", "test"));
	text = clp_cfg_to_string(&schema, &a);
	CHECK(text != NULL, "printed");
	if (!text)
		return;
	CHECK_OK(clp_cfg_defaults(&schema, &b));
	CHECK_OK(clp_cfg_load_string(&schema, &b, text, "printed"));
	CHECK(a.lr == b.lr && a.tied == b.tied && !strcmp(a.data, b.data) && a.split.n == b.split.n &&
	      a.split.v[2] == b.split.v[2] && a.n_layer == b.n_layer, "round trip:\n%s", text);
	CHECK(strstr(text, "[optim]\nlr = 0.1\n") != NULL, "sections and values:\n%s", text);
	free(text);
}

static void test_args(void)
{
	struct demo d;
	char path[] = "/tmp/clpipe-test-config-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = {"train", "--model.n_layer=6", "--device", "0", "--config", path,
			"--optim.lr", "0.25", "extra", NULL};
	int argc = 9;

	CHECK(fd >= 0, "temp file");
	if (fd < 0)
		return;
	CHECK(write(fd, "[model]\nn_layer = 2\npreset = 'bert'\n", 36) == 36, "write");
	close(fd);
	CHECK_OK(clp_cfg_defaults(&schema, &d));
	CHECK_OK(clp_cfg_args(&schema, &d, &argc, argv));
	CHECK(d.n_layer == 6, "command line beats the file: %ld", d.n_layer);
	CHECK(!strcmp(d.preset, "bert"), "file applied: %s", d.preset);
	CHECK(d.lr == 0.25, "lr %g", d.lr);
	CHECK(argc == 4 && !strcmp(argv[1], "--device") && !strcmp(argv[2], "0") &&
	      !strcmp(argv[3], "extra"), "other arguments stay in order (argc %d)", argc);
	unlink(path);
}

static void test_errors(void)
{
	struct demo d;
	char *argv1[] = {"x", "--config", "/nonexistent/dir/c.toml", NULL};
	char *argv2[] = {"x", "--model.n_layer", NULL};
	int argc;

	CHECK_OK(clp_cfg_defaults(&schema, &d));
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\nn_layers = 3\n", "c.toml"),
		  CLP_ERR_INVALID, "c.toml:2", "model.n_layers", "unknown");
	/* a close misspelling names the key meant (issue 26); a far one does not guess */
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\nn_layers = 3\n", "c.toml"),
		  CLP_ERR_INVALID, "did you mean 'model.n_layer'?");
	CHECK(clp_cfg_nearest(&schema, "model.nlayer") &&
	      !strcmp(clp_cfg_nearest(&schema, "model.nlayer"), "model.n_layer"), "one deletion");
	CHECK(clp_cfg_nearest(&schema, "n_layer") &&
	      !strcmp(clp_cfg_nearest(&schema, "n_layer"), "model.n_layer"), "the key without "
	      "its section");
	CHECK(clp_cfg_nearest(&schema, "zzzzzz.qqqq") == NULL, "nothing close: no guess");
	CHECK(clp_cfg_distance("ckpt.evry", "ckpt.every") == 1 &&
	      clp_cfg_distance("stpes", "steps") == 1 && clp_cfg_distance("", "abc") == 3,
	      "edit distance with adjacent swaps");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\nn_layer = three\n", "c.toml"),
		  CLP_ERR_INVALID, "c.toml:2", "model.n_layer", "integer");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "\n\n[model]\nn_layer = 0\n", "c.toml"),
		  CLP_ERR_INVALID, "c.toml:4", "out of range");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[optim]\nlr = nan\n", "c.toml"),
		  CLP_ERR_INVALID, "optim.lr", "finite");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\npreset = \"gpt3\"\n", "c.toml"),
		  CLP_ERR_INVALID, "model.preset", "gpt2|llama|bert");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\npreset = \"gpt2\n", "c.toml"),
		  CLP_ERR_INVALID, "c.toml:2", "unterminated");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model\nn_layer = 1\n", "c.toml"),
		  CLP_ERR_FORMAT, "c.toml:1", "section");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "[model]\nn_layer\n", "c.toml"),
		  CLP_ERR_FORMAT, "c.toml:2", "key = value");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "pipeline.layers = [1, x]\n", "c.toml"),
		  CLP_ERR_INVALID, "pipeline.layers");
	CHECK_ERR(clp_cfg_load_string(&schema, &d, "model.tied = maybe\n", "c.toml"),
		  CLP_ERR_INVALID, "model.tied", "true or false");
	argc = 3;
	CHECK_ERR(clp_cfg_args(&schema, &d, &argc, argv1), CLP_ERR_IO, "/nonexistent/dir/c.toml");
	argc = 2;
	CHECK_ERR(clp_cfg_args(&schema, &d, &argc, argv2), CLP_ERR_INVALID, "needs a value");
	CHECK(d.n_layer == 12, "a rejected value is not stored: %ld", d.n_layer);
}

/* Command-line strings keep their blanks; file values are trimmed; a quoted argument is parsed. */
static void test_arg_blanks(void)
{
	struct demo d;
	char *argv[] = {"x", "--data.path", "  two spaces  ", NULL};
	int argc = 3;

	CHECK_OK(clp_cfg_defaults(&schema, &d));
	CHECK_OK(clp_cfg_args(&schema, &d, &argc, argv));
	CHECK(!strcmp(d.data, "  two spaces  "), "argument kept as given: '%s'", d.data);
	CHECK_OK(clp_cfg_set_arg(&schema, &d, "data.path", "The ", "test"));
	CHECK(!strcmp(d.data, "The "), "'%s'", d.data);
	CHECK_OK(clp_cfg_set_arg(&schema, &d, "data.path", "\"quoted \\\" \"", "test"));
	CHECK(!strcmp(d.data, "quoted \" "), "a quoted argument is parsed: '%s'", d.data);
	CHECK_OK(clp_cfg_set_arg(&schema, &d, "model.n_layer", " 7 ", "test"));
	CHECK(d.n_layer == 7, "numbers are trimmed: %ld", d.n_layer);
	CHECK_OK(clp_cfg_set(&schema, &d, "data.path", "  bare  ", "test"));
	CHECK(!strcmp(d.data, "bare"), "file values are trimmed: '%s'", d.data);
}

/* Control characters print as \u escapes and read back. */
static void test_control_chars(void)
{
	struct demo a, b;
	char *text;

	CHECK_OK(clp_cfg_defaults(&schema, &a));
	CHECK_OK(clp_cfg_set_arg(&schema, &a, "data.path", "a\rb\001" "c\td\ne ", "test"));
	text = clp_cfg_to_string(&schema, &a);
	CHECK(text && strstr(text, "\"a\\u000db\\u0001c\\td\\ne \"") != NULL, "escaped:\n%s",
	      text ? text : "(null)");
	CHECK_OK(clp_cfg_defaults(&schema, &b));
	CHECK_OK(clp_cfg_load_string(&schema, &b, text ? text : "", "printed"));
	CHECK(!strcmp(a.data, b.data), "read back '%s'", b.data);
	free(text);
}

/* Origins: recorded by every setter, printed after non-default values; a strict set refuses a
 * contradicting explicit value and names both. */
static void test_origins(void)
{
	clp_train_config *c = malloc(sizeof(*c));
	char *text = NULL, *buf = NULL;
	size_t len = 0;
	FILE *m;

	CHECK(c != NULL, "alloc");
	if (!c)
		return;
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, c));
	CHECK(!strcmp(clp_cfg_origin_of(&clp_train_schema, c, "model.n_head"), "default"), "%s",
	      clp_cfg_origin_of(&clp_train_schema, c, "model.n_head"));
	CHECK_OK(clp_cfg_set_arg(&clp_train_schema, c, "model.n_head", "2",
				 "command line --model.n_head"));
	CHECK_ERR(clp_cfg_set_strict(&clp_train_schema, c, "model.n_head", "4",
				     "m/config.json n_head"), CLP_ERR_INVALID,
		  "model.n_head = 2 (command line --model.n_head) contradicts model.n_head = 4 "
		  "(m/config.json n_head)");
	CHECK(c->model.n_head == 2, "unchanged after the refusal: %ld", c->model.n_head);
	CHECK_OK(clp_cfg_set_strict(&clp_train_schema, c, "model.n_head", "2", "m/config.json"));
	CHECK_OK(clp_cfg_set_strict(&clp_train_schema, c, "model.n_layer", "3",
				    "m/config.json n_layer"));
	CHECK(c->model.n_layer == 3, "a default gives way: %ld", c->model.n_layer);
	m = open_memstream(&buf, &len);
	if (m) {
		clp_cfg_write(&clp_train_schema, c, m, CLP_CFG_ORIGINS);
		fclose(m);
	}
	CHECK(buf && strstr(buf, "n_layer = 3  # m/config.json n_layer\n") &&
	      strstr(buf, "n_embd") == NULL && strstr(buf, "d_model = 128\n"), "origins:\n%s",
	      buf ? buf : "");
	text = clp_cfg_to_string(&clp_train_schema, c);
	CHECK(text && !strstr(text, "#"), "no origins in the stored text");
	free(buf);
	free(text);
	free(c);
}

/* The config stored in checkpoints: each section once (TOML), and it reads back to the same
 * text. With CLPIPE_TEST_TOML_OUT set the text is also written there (test_config_toml.sh
 * checks it with Python's tomllib). */
static void test_stored_config(void)
{
	clp_train_config *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	const char *toml_out = getenv("CLPIPE_TEST_TOML_OUT");
	char *ta = NULL, *tb = NULL;

	CHECK(a && b, "alloc");
	if (!a || !b)
		goto out;
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, a));
	CHECK_OK(clp_cfg_set_arg(&clp_train_schema, a, "sample.prompt", " The \"end\"\n\\ ",
				 "test"));
	CHECK_OK(clp_cfg_set(&clp_train_schema, a, "pipeline.layers", "[2, 2]", "test"));
	ta = clp_cfg_to_string(&clp_train_schema, a);
	CHECK(ta != NULL, "printed");
	if (!ta)
		goto out;
	for (const char *p = ta; (p = strchr(p, '[')) != NULL; p++) {
		const char *e = strchr(p, ']');
		char head[64];

		if (p != ta && p[-1] != '\n')
			continue;
		snprintf(head, sizeof(head), "\n%.*s\n", e ? (int)(e - p + 1) : 0, p);
		CHECK(strstr(e ? e : p, head) == NULL, "section %s appears twice", head + 1);
	}
	CHECK_OK(clp_cfg_defaults(&clp_train_schema, b));
	CHECK_OK(clp_cfg_load_string(&clp_train_schema, b, ta, "stored"));
	tb = clp_cfg_to_string(&clp_train_schema, b);
	CHECK(tb && !strcmp(ta, tb), "round trip:\n%s\n---\n%s", ta, tb ? tb : "");
	CHECK(!strcmp(a->sample.prompt, b->sample.prompt), "prompt '%s'", b->sample.prompt);
	if (toml_out) {
		FILE *f = fopen(toml_out, "w");

		CHECK(f && fputs(ta, f) >= 0, "writing %s", toml_out);
		if (f)
			fclose(f);
	}
out:
	free(ta);
	free(tb);
	free(a);
	free(b);
}

TH_MAIN(TH_TEST(test_defaults_and_file), TH_TEST(test_round_trip), TH_TEST(test_args),
	TH_TEST(test_errors), TH_TEST(test_arg_blanks), TH_TEST(test_control_chars),
	TH_TEST(test_origins), TH_TEST(test_stored_config))
