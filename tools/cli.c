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
