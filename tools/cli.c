/* Option parsing and error reporting shared by the subcommands. */
#include "tools/cli.h"

#include <stdarg.h>
#include <string.h>

int cli_value(int argc, char **argv, int *i, const char *name, const char **value)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*value = a + n + 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*value = argv[++*i];
	return 1;
}

int cli_is_help(const char *arg)
{
	return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

int cli_fail(const char *cmd, clp_status s)
{
	fprintf(stderr, "clpipe %s: error: %s [%s]\n", cmd, clp_last_error(), clp_status_str(s));
	return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "clpipe %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see clpipe %s --help)\n", cmd);
	return 2;
}

int cli_parse_short(const char *cmd, const clp_cfg_schema *schema, const char *section, void *cfg,
		    int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char key[96], name[64];
		const char *a = argv[i], *eq, *val = NULL;
		const clp_cfg_field *f;
		int neg;

		if (strncmp(a, "--", 2))
			return cli_usage_error(cmd, "unexpected argument '%s'", a);
		eq = strchr(a, '=');
		snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - a - 2 : (long)strlen(a) - 2),
			 a + 2);
		for (char *p = name; *p; p++)
			*p = *p == '-' ? '_' : *p;
		neg = !strncmp(name, "no_", 3);
		snprintf(key, sizeof(key), "%s.%s", section, neg ? name + 3 : name);
		if (!(f = clp_cfg_find(schema, key)) || (neg && f->type != CLP_CFG_BOOL))
			return cli_usage_error(cmd, "unknown option '%s'", a);
		if (f->type == CLP_CFG_BOOL && !eq)
			val = neg ? "false" : "true";
		else if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return cli_usage_error(cmd, "%s needs a value", a);
		if (clp_cfg_set(schema, cfg, key, val, "command line") != CLP_OK)
			return cli_usage_error(cmd, "%s", clp_last_error());
	}
	return 0;
}
