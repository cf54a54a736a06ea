/* floor_main.c: the C start-up floor: raw_post of the last argument (notify-bench passes `-z 0 -p NAME`). */
int raw_post(const char *name);

int main(int argc, char **argv) { return argc < 2 ? 64 : raw_post(argv[argc - 1]); }
