/* Model presets and configuration checks. */
#include "engine/model/model.h"

#include <string.h>
#include <strings.h>

static const char *const preset_names[] = {"gpt2", "llama", "bert"};

const char *clp_preset_name(clp_preset p)
{
	return (unsigned)p < 3 ? preset_names[p] : "?";
}

clp_status clp_preset_parse(const char *name, clp_preset *out)
{
	for (int i = 0; i < 3; i++)
		if (!strcasecmp(name, preset_names[i])) {
			*out = (clp_preset)i;
			return CLP_OK;
		}
	return clp_error(CLP_ERR_INVALID, "model.preset = \"%s\": expected gpt2, llama or bert",
			 name);
}

clp_status clp_model_config_resolve(clp_model_config *c)
{
	if (c->n_layer < 1)
		return clp_error(CLP_ERR_INVALID, "model.n_layer = %d: need at least 1", c->n_layer);
	if (c->d_model < 1 || c->n_head < 1)
		return clp_error(CLP_ERR_INVALID, "model.d_model = %d, model.n_head = %d: both must "
				 "be positive", c->d_model, c->n_head);
	if (c->d_model % c->n_head)
		return clp_error(CLP_ERR_INVALID, "model.d_model = %d is not a multiple of "
				 "model.n_head = %d", c->d_model, c->n_head);
	if (c->n_kv_head == 0)
		c->n_kv_head = c->n_head;
	if (c->preset != CLP_PRESET_LLAMA && c->n_kv_head != c->n_head)
		return clp_error(CLP_ERR_INVALID, "model.n_kv_head = %d: only llama has grouped-query "
				 "attention (%s uses n_kv_head = n_head = %d)", c->n_kv_head,
				 clp_preset_name(c->preset), c->n_head);
	if (c->n_kv_head < 1 || c->n_head % c->n_kv_head)
		return clp_error(CLP_ERR_INVALID, "model.n_kv_head = %d must divide model.n_head = %d",
				 c->n_kv_head, c->n_head);
	if (c->preset == CLP_PRESET_LLAMA && (c->d_model / c->n_head) % 2)
		return clp_error(CLP_ERR_INVALID, "llama: head size d_model / n_head = %d must be even "
				 "for rotary positions", c->d_model / c->n_head);
	if (c->d_ff == 0) {
		if (c->preset == CLP_PRESET_LLAMA) /* as Meta's: 2/3 of 4C, rounded up to 256 */
			c->d_ff = (8 * c->d_model / 3 + 255) / 256 * 256;
		else
			c->d_ff = 4 * c->d_model;
	}
	if (c->d_ff < 1)
		return clp_error(CLP_ERR_INVALID, "model.d_ff = %d must be positive", c->d_ff);
	if (c->vocab < 2)
		return clp_error(CLP_ERR_INVALID, "model.vocab = %d: need at least 2 symbols", c->vocab);
	if (c->ctx < 1)
		return clp_error(CLP_ERR_INVALID, "model.ctx = %d must be positive", c->ctx);
	if (c->norm_eps <= 0)
		c->norm_eps = c->preset == CLP_PRESET_GPT2 ? 1e-5f
			      : c->preset == CLP_PRESET_LLAMA ? 1e-6f : 1e-12f;
	if (c->rope_theta <= 0)
		c->rope_theta = 10000.0f;
	if (c->preset == CLP_PRESET_BERT && c->n_types < 1)
		c->n_types = 2;
	if (c->preset != CLP_PRESET_BERT)
		c->n_types = 0;
	if (c->dropout < 0 || c->dropout >= 1)
		return clp_error(CLP_ERR_INVALID, "model.dropout = %g: expected 0 <= p < 1",
				 (double)c->dropout);
	if (c->preset != CLP_PRESET_LLAMA)
		c->tied = 1; /* GPT-2's head and BERT's MLM decoder are the token embedding */
	if (c->lora_r < 0 || c->lora_r > c->d_model)
		return clp_error(CLP_ERR_INVALID, "model.lora_r = %d: expected 0 (no adapters) to "
				 "model.d_model = %d", c->lora_r, c->d_model);
	if (c->lora_r == 0)
		c->lora_mask = 0, c->lora_dropout = 0;
	if (!(c->lora_dropout >= 0 && c->lora_dropout < 1))
		return clp_error(CLP_ERR_INVALID, "model.lora_dropout = %g: expected 0 <= p < 1",
				 (double)c->lora_dropout);
	if (c->lora_r > 0 && (c->lora_mask == 0 || !(c->lora_alpha > 0)))
		return clp_error(CLP_ERR_INVALID, "model.lora_r = %d needs target linears and "
				 "model.lora_alpha > 0 (it is %g)", c->lora_r, (double)c->lora_alpha);
	return CLP_OK;
}
