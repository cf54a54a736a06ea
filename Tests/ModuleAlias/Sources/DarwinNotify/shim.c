#include "darwin_notify_shim.h"
int darwin_notify_shim_answer(void) { return 42; }
