/* The step lines of `clpipe train` (engine/train/progress.h): in a pipe or file exactly the plain
 * lines of before; on a terminal one status line cut to the width, rewritten in place; the
 * width read from a real pseudo-terminal. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "engine/train/progress.h"
#include "tests/harness.h"

static const clp_progress step5 = {5, 10, 2.12345, 1e-3, 0.5, 1234.4, 10.2, 65.0, 0, 0};

/* The plain lines are what scripts and logs read: they stay byte for byte as they were. */
static void test_plain_unchanged(void)
{
	clp_progress p = step5;
	char line[1024];

	clp_progress_format(line, sizeof(line), &p, 0);
	CHECK(!strcmp(line, "step 5/10 | loss 2.1235 | lr 1.00e-03 | norm 0.500 | 1234 tok/s | "
			    "10 ms/step | ETA 1m05s\n"), "plain line: '%s'", line);
	p.skipped = 1;
	p.eta_s = 7500;
	p.step = 1500;
	p.steps = 1500;
	clp_progress_format(line, sizeof(line), &p, 0);
	CHECK(!strcmp(line, "step 1500/1500 | loss 2.1235 | lr 1.00e-03 | norm 0.500 | 1234 tok/s "
			    "| 10 ms/step | ETA 2h05m | non-finite gradient: step skipped\n"),
	      "plain line of a skipped step: '%s'", line);
	clp_progress_format(line, 8, &p, 0);
	CHECK(strlen(line) == 7, "cut to the buffer: '%s'", line);
	/* fp16: the loss scale, on the steps where it changed */
	p.scale = 32768;
	clp_progress_format(line, sizeof(line), &p, 0);
	CHECK(strstr(line, "step skipped | loss scale 32768\n") != NULL, "the loss scale: '%s'",
	      line);
	clp_progress_format(line, sizeof(line), &p, 132);
	CHECK(strstr(line, "| step skipped | loss scale 32768") != NULL,
	      "the loss scale on the status line: '%s'", line);
}

static void test_status_line(void)
{
	static const int widths[] = {1, 2, 20, 40, 69, 70, 80, 132, 300};
	char line[1024];

	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
		int w = widths[i];
		clp_progress p = step5;

		clp_progress_format(line, sizeof(line), &p, w);
		CHECK(line[0] == '\r', "width %d: starts by returning to the line's start", w);
		CHECK(strchr(line, '\n') == NULL, "width %d: no newline", w);
		CHECK((int)strlen(line) == w, "width %d: the line fills %d columns, not %zu", w,
		      w - 1, strlen(line) - 1);
		if (w >= 70)
			CHECK(!strncmp(line, "\r[==========          ] step 5/10 | loss 2.1235 | 1234 "
				       "tok/s | ETA 1m05s", 60), "width %d: bar and fields: '%s'", w,
			      line);
		else if (w >= 40)
			CHECK(!strncmp(line, "\rstep 5/10 | loss 2.1235 | 1234 tok/s | ETA", w < 43
							       ? w : 43),
			      "width %d: fields without the bar: '%s'", w, line);
	}
	{
		clp_progress p = step5;

		p.skipped = 1;
		clp_progress_format(line, sizeof(line), &p, 120);
		CHECK(strstr(line, "| step skipped") != NULL, "a skipped step shows: '%s'", line);
		p.step = 12;
		clp_progress_format(line, sizeof(line), &p, 120);
		CHECK(!strncmp(line, "\r[====================]", 23), "the bar stays full: '%s'", line);
	}
}

static void test_clear(void)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return;
	clp_progress_clear(f, 0);
	clp_progress_clear(f, 6);
	fclose(f);
	CHECK(buf && !strcmp(buf, "\r     \r"), "cleared: '%s'", buf ? buf : "");
	free(buf);
}

/* A file is not a terminal; a pseudo-terminal is, with the width it was given. */
static void test_width(void)
{
	FILE *f = tmpfile();
	int m, sfd;
	char *name;
	struct winsize ws = {0};

	CHECK(f && clp_progress_width(f) == 0, "a file gives plain lines");
	if (f)
		fclose(f);
	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m) || !(name = ptsname(m))) {
		printf("no pseudo-terminal here: the terminal width is not checked\n");
		if (m >= 0)
			close(m);
		return;
	}
	sfd = open(name, O_RDWR | O_NOCTTY);
	CHECK(sfd >= 0, "open %s", name);
	if (sfd >= 0) {
		FILE *t = fdopen(sfd, "w");

		ws.ws_col = 57;
		ws.ws_row = 20;
		CHECK(ioctl(sfd, TIOCSWINSZ, &ws) == 0, "set the width");
		CHECK(t && clp_progress_width(t) == 57, "the terminal's width: %d",
		      t ? clp_progress_width(t) : -1);
		ws.ws_col = 0;
		ioctl(sfd, TIOCSWINSZ, &ws);
		CHECK(t && clp_progress_width(t) == 80, "80 when the terminal does not say: %d",
		      t ? clp_progress_width(t) : -1);
		if (t)
			fclose(t);
		else
			close(sfd);
	}
	close(m);
}

TH_MAIN(TH_TEST(test_plain_unchanged), TH_TEST(test_status_line), TH_TEST(test_clear),
	TH_TEST(test_width))
