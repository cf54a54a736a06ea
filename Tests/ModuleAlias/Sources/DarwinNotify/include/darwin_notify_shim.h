/* The third party's own shim: a function of its own, in a module named DarwinNotify. */
int darwin_notify_shim_answer(void);
