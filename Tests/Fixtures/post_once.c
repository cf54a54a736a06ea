/* A program as written for macOS: posts the name given on its command line with notify(3). */
#include <notify.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: post_once NAME\n"); return 64; }
    uint32_t status = notify_post(argv[1]);
    if (status != NOTIFY_STATUS_OK) { fprintf(stderr, "notify_post: %u\n", status); return 1; }
    return 0;
}
