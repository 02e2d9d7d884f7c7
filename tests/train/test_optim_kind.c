/* optim.name as an optimizer kind (clp_train_optim_kind) and the table of what each kind
 * provides (engine/train/optim_kind.h): every choice the schema allows parses to its own kind
 * and every kind is some choice; an unknown name is refused naming it; every entry is complete
 * (settings, state bytes, fp32 at least, a reason where it refuses a precision); the two kinds
 * of today say what the session and the planner relied on before the table (K-FAC: curvature
 * memory, PipeFisher, no SkipPipe, no fp16; AdamW: the executor's default, everything). */
#include <string.h>

#include "engine/train/optim_kind.h"
#include "tests/harness.h"

static const clp_cfg_field *field(const char *key)
{
	for (int i = 0; i < clp_train_schema.nfields; i++)
		if (!strcmp(clp_train_schema.fields[i].key, key))
			return &clp_train_schema.fields[i];
	return NULL;
}

static void test_choices_are_the_kinds(void)
{
	const clp_cfg_field *f = field("optim.name");
	char list[256], *save = NULL;
	int seen[CLP_OPTIM_NKINDS] = {0}, n = 0;
	clp_train_config c;

	CHECK(f && f->choices, "optim.name has a list of choices");
	if (!f || !f->choices)
		return;
	snprintf(list, sizeof(list), "%s", f->choices);
	for (char *t = strtok_r(list, "|", &save); t; t = strtok_r(NULL, "|", &save), n++) {
		clp_optim_kind k = CLP_OPTIM_NKINDS;

		snprintf(c.optim.name, sizeof(c.optim.name), "%s", t);
		CHECK_OK(clp_train_optim_kind(&c, &k));
		CHECK(k < CLP_OPTIM_NKINDS && !seen[k], "choice %s: kind %d, seen before: %d", t,
		      (int)k, k < CLP_OPTIM_NKINDS ? seen[k] : -1);
		if (k < CLP_OPTIM_NKINDS)
			seen[k] = 1;
	}
	CHECK(n == CLP_OPTIM_NKINDS, "%d choices for %d kinds", n, CLP_OPTIM_NKINDS);
	snprintf(c.optim.name, sizeof(c.optim.name), "sgd");
	{
		clp_optim_kind k;

		CHECK_ERR(clp_train_optim_kind(&c, &k), CLP_ERR_INVALID, "optim.name", "\"sgd\"");
	}
	snprintf(c.optim.name, sizeof(c.optim.name), "kfac");
	{
		clp_optim_kind k = CLP_OPTIM_ADAMW;

		CHECK_OK(clp_train_optim_kind(&c, &k));
		CHECK(k == CLP_OPTIM_KFAC, "\"kfac\" is CLP_OPTIM_KFAC (got %d)", (int)k);
	}
}

static void test_entries_complete(void)
{
	clp_train_config c;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	for (int k = 0; k < CLP_OPTIM_NKINDS; k++) {
		const clp_optim_info *o = clp_optim_info_of((clp_optim_kind)k);
		clp_optim_step st;

		CHECK(o && (int)o->kind == k && o->label && o->step && o->state_bytes > 0,
		      "kind %d: an entry with its kind, label, step settings and state bytes", k);
		if (!o)
			continue;
		CHECK(o->precisions & 1u << CLP_F32, "%s runs in fp32", o->label);
		CHECK((o->precisions & (1u << CLP_BF16 | 1u << CLP_F16)) ==
			      (1u << CLP_BF16 | 1u << CLP_F16) || o->precision_why,
		      "%s refuses a precision without saying why", o->label);
		memset(&st, 0xff, sizeof(st));
		if (o->step)
			o->step(&c, 0.25, 7, &st);
		CHECK(st.adamw.lr == 0.25f && st.adamw.step == 7 &&
			      st.adamw.beta1 == (float)c.optim.beta1 &&
			      st.adamw.beta2 == (float)c.optim.beta2 && st.adamw.eps == (float)c.optim.eps &&
			      st.adamw.weight_decay == (float)c.optim.weight_decay,
		      "%s's step settings: AdamW's hyperparameters from the config", o->label);
	}
	CHECK(clp_optim_info_of(CLP_OPTIM_NKINDS) == NULL, "no entry past the kinds");
}

static void test_what_each_provides(void)
{
	const clp_optim_info *a = clp_optim_info_of(CLP_OPTIM_ADAMW);
	const clp_optim_info *k = clp_optim_info_of(CLP_OPTIM_KFAC);

	if (!a || !k) {
		CHECK(0, "both entries exist");
		return;
	}
	CHECK(!a->open && !a->curvature && !a->pipefisher && a->skippipe &&
	      a->precisions == (1u << CLP_F32 | 1u << CLP_BF16 | 1u << CLP_F16) &&
	      a->state_bytes == 8, "AdamW: the executor's default, every schedule and precision, "
	      "two fp32 moments a parameter");
	CHECK(k->open && k->curvature && k->pipefisher && !k->skippipe &&
	      !(k->precisions & 1u << CLP_F16) && (k->precisions & 1u << CLP_BF16) &&
	      k->state_bytes == 8, "K-FAC: installed at opening, factors, PipeFisher, no SkipPipe, "
	      "no fp16");
	CHECK(k->precision_why && strstr(k->precision_why, "loss scale"),
	      "K-FAC says why not fp16");
}

/* Muon: installed at opening, every precision (fp32 masters; its update is scale-free),
 * SkipPipe, PipeFisher with muon.delay, its matrices' rate muon.lr / optim.lr times the scheduled one, its momentum in
 * AdamW's m */
static void test_muon_entry(void)
{
	const clp_optim_info *m = clp_optim_info_of(CLP_OPTIM_MUON);
	clp_train_config c;
	clp_optim_step st;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	if (!m) {
		CHECK(0, "the Muon entry exists");
		return;
	}
	CHECK(m->open && !m->curvature && m->pipefisher && m->skippipe &&
	      m->precisions == (1u << CLP_F32 | 1u << CLP_BF16 | 1u << CLP_F16) &&
	      m->state_bytes == 8, "Muon: installed at opening, every precision, SkipPipe, "
	      "PipeFisher (muon.delay's Newton-Schulz; refused without it: test_kfac_train), two "
	      "fp32 moments a parameter");
	CHECK(m->layer_work && !clp_optim_info_of(CLP_OPTIM_ADAMW)->layer_work &&
	      !clp_optim_info_of(CLP_OPTIM_KFAC)->layer_work, "only Muon adds work per layer");
	c.optim.lr = 1e-3;
	c.muon.lr = 0.02;
	m->step(&c, 5e-4, 3, &st);
	CHECK(st.muon.lr == (float)(5e-4 * 20) && st.muon.adamw.lr == 5e-4f &&
	      st.muon.adamw.step == 3, "Muon's rate follows the schedule: %g", st.muon.lr);
	c.muon.lr = 0;
	m->step(&c, 5e-4, 3, &st);
	CHECK(st.muon.lr == 5e-4f, "muon.lr = 0: optim.lr's schedule (%g)", st.muon.lr);
	snprintf(c.optim.name, sizeof(c.optim.name), "muon");
	{
		clp_optim_kind k = CLP_OPTIM_ADAMW;

		CHECK_OK(clp_train_optim_kind(&c, &k));
		CHECK(k == CLP_OPTIM_MUON, "\"muon\" is CLP_OPTIM_MUON (got %d)", (int)k);
	}
}

/* Shampoo: as Muon (installed at opening, every precision, SkipPipe, no PipeFisher), its
 * matrices' rate shampoo.lr / optim.lr times the scheduled one; its work per layer counts the
 * roots once per interval */
static void test_shampoo_entry(void)
{
	const clp_optim_info *m = clp_optim_info_of(CLP_OPTIM_SHAMPOO);
	clp_train_config c;
	clp_model_config mc;
	clp_optim_step st;
	double w1, w10;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	if (!m) {
		CHECK(0, "the Shampoo entry exists");
		return;
	}
	CHECK(m->open && !m->curvature && m->pipefisher && m->skippipe &&
	      m->precisions == (1u << CLP_F32 | 1u << CLP_BF16 | 1u << CLP_F16) &&
	      m->state_bytes == 8 && !strcmp(m->label, "Shampoo"), "Shampoo: installed at "
	      "opening, every precision, SkipPipe, its root refreshes in PipeFisher's bubbles");
	c.optim.lr = 1e-3;
	c.shampoo.lr = 0.1;
	m->step(&c, 5e-4, 3, &st);
	CHECK(st.shampoo.lr == (float)(5e-4 * 100) && st.shampoo.adamw.lr == 5e-4f &&
	      st.shampoo.adamw.step == 3, "Shampoo's rate follows the schedule: %g",
	      st.shampoo.lr);
	snprintf(c.optim.name, sizeof(c.optim.name), "shampoo");
	{
		clp_optim_kind k = CLP_OPTIM_ADAMW;

		CHECK_OK(clp_train_optim_kind(&c, &k));
		CHECK(k == CLP_OPTIM_SHAMPOO, "\"shampoo\" is CLP_OPTIM_SHAMPOO (got %d)", (int)k);
	}
	mc = (clp_model_config){.preset = CLP_PRESET_GPT2, .n_layer = 2, .d_model = 64,
				.n_head = 4, .vocab = 256, .ctx = 64};
	CHECK_OK(clp_model_config_resolve(&mc));
	w1 = clp_exec_shampoo_layer_work(&mc, 1024, 25, 1);
	w10 = clp_exec_shampoo_layer_work(&mc, 1024, 25, 10);
	CHECK(w1 > w10 && w10 > 0 && m->layer_work, "the roots' work shrinks with the interval: "
	      "%g, %g", w1, w10);
	CHECK(clp_exec_shampoo_layer_work(&mc, 1024, 25, 0) == 0, "interval 0 is refused");
}

/* SOAP: as Shampoo (PipeFisher: stale eigenbases, soap.stale), its rate soap.lr /
 * optim.lr times the scheduled one, soap.weight_decay -1 (the default) optim.weight_decay, its
 * work per layer counting the refreshes once per soap.frequency; a wrong soap.* value is refused
 * with a message naming the key */
static void test_soap_entry(void)
{
	const clp_optim_info *m = clp_optim_info_of(CLP_OPTIM_SOAP);
	clp_train_config c;
	clp_model_config mc;
	clp_optim_step st;
	clp_optim_kind k = CLP_OPTIM_ADAMW;
	double w1, w10;

	CHECK_OK(clp_cfg_defaults(&clp_train_schema, &c));
	if (!m) {
		CHECK(0, "the SOAP entry exists");
		return;
	}
	CHECK(m->open && !m->curvature && m->pipefisher && m->skippipe && m->own_bytes &&
	      m->precisions == (1u << CLP_F32 | 1u << CLP_BF16 | 1u << CLP_F16) &&
	      m->state_bytes == 8 && !strcmp(m->label, "SOAP") && !c.soap.stale,
	      "SOAP: installed at opening, every precision, SkipPipe, PipeFisher (stale bases, "
	      "soap.stale off by default)");
	CHECK(c.soap.lr == 1e-2 && c.soap.beta1 == 0.95 && c.soap.beta2 == 0.95 &&
	      c.soap.shampoo_beta == -1 && c.soap.eps == 1e-8 && c.soap.frequency == 10 &&
	      c.soap.correct_bias && c.soap.weight_decay == -1, "SOAP's defaults");
	c.optim.lr = 1e-3;
	c.optim.weight_decay = 0.1;
	m->step(&c, 5e-4, 3, &st);
	CHECK(st.soap.lr == (float)(5e-4 * 10) && st.soap.adamw.lr == 5e-4f &&
	      st.soap.adamw.step == 3 && st.soap.weight_decay == 0.1f,
	      "SOAP's rate follows the schedule: %g, decay %g", st.soap.lr, st.soap.weight_decay);
	c.soap.weight_decay = 0.01;
	m->step(&c, 5e-4, 3, &st);
	CHECK(st.soap.weight_decay == 0.01f && st.soap.adamw.weight_decay == 0.1f,
	      "soap.weight_decay is its matrices' only");
	snprintf(c.optim.name, sizeof(c.optim.name), "soap");
	CHECK_OK(clp_train_optim_kind(&c, &k));
	CHECK(k == CLP_OPTIM_SOAP, "\"soap\" is CLP_OPTIM_SOAP (got %d)", (int)k);
	mc = (clp_model_config){.preset = CLP_PRESET_GPT2, .n_layer = 2, .d_model = 64,
				.n_head = 4, .vocab = 256, .ctx = 64};
	CHECK_OK(clp_model_config_resolve(&mc));
	w1 = clp_exec_soap_layer_work(&mc, 1024, 1);
	w10 = clp_exec_soap_layer_work(&mc, 1024, 10);
	CHECK(w1 > w10 && w10 > 0 && m->layer_work, "the refreshes' work shrinks with the "
	      "frequency: %g, %g", w1, w10);
	CHECK(clp_exec_soap_layer_work(&mc, 1024, 0) == 0, "frequency 0 is refused");
	{
		static const char *const bad[][2] = {{"soap.beta1", "1.5"}, {"soap.frequency", "0"},
						     {"soap.eps", "0"}, {"soap.lr", "-1"}};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			clp_status e = clp_cfg_set(&clp_train_schema, &c, bad[i][0], bad[i][1],
						   "the test");

			CHECK(e != CLP_OK && strstr(clp_last_error(), bad[i][0]),
			      "%s = %s refused naming the key: %s", bad[i][0], bad[i][1],
			      clp_last_error());
			clp_error_clear();
		}
	}
}

TH_MAIN(TH_TEST(test_choices_are_the_kinds), TH_TEST(test_entries_complete),
	TH_TEST(test_what_each_provides), TH_TEST(test_muon_entry), TH_TEST(test_shampoo_entry),
	TH_TEST(test_soap_entry))
