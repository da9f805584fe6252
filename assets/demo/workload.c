/* The workload behind assets/demo.xtop (see make-demo.sh): a small "database"
 * built with frame pointers, so its user stacks unwind to main, next to
 * distro binaries (dd) that have none and show [truncated]. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int jobs[2];
static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t checksum_page(const uint8_t *p)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 4096; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

__attribute__((noinline)) static void *checksum_worker(void *arg)
{
	static uint8_t page[4096];
	for (;;)
		sink += checksum_page(page);
	return arg;
}

__attribute__((noinline)) static void scan_table(int fd, void *buf)
{
	off_t off = (random() % 4096) * 4096;
	if (pread(fd, buf, 4096, off) < 0)
		exit(1);
}

__attribute__((noinline)) static void *scanner(void *path)
{
	void *buf;
	int fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, 4096, 4096))
		exit(1);
	for (;;)
		scan_table(fd, buf);
}

__attribute__((noinline)) static void flush_journal(int fd, const char *rec)
{
	if (write(fd, rec, 512) != 512)
		exit(1);
}

__attribute__((noinline)) static void *journal_writer(void *path)
{
	char rec[512];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DSYNC, 0600);
	if (fd < 0)
		exit(1);
	memset(rec, 'j', sizeof(rec));
	for (;;)
		flush_journal(fd, rec);
}

__attribute__((noinline)) static void wait_for_job(void)
{
	char c;
	if (read(jobs[0], &c, 1) != 1)
		exit(0);
}

__attribute__((noinline)) static void *job_worker(void *arg)
{
	for (;;)
		wait_for_job();
	return arg;
}

__attribute__((noinline)) static void dispatch_jobs(void)
{
	struct timespec t = {0, 20 * 1000 * 1000};
	for (;;) {
		nanosleep(&t, NULL);
		if (write(jobs[1], "j", 1) != 1)
			exit(1);
	}
}

int main(int argc, char **argv)
{
	pthread_t t;
	if (argc < 3 || pipe(jobs))
		return 2;
	for (int i = 0; i < 3; i++)
		pthread_create(&t, NULL, checksum_worker, NULL);
	pthread_create(&t, NULL, scanner, argv[1]);
	pthread_create(&t, NULL, journal_writer, argv[2]);
	for (int i = 0; i < 4; i++)
		pthread_create(&t, NULL, job_worker, NULL);
	dispatch_jobs();
	return 0;
}
