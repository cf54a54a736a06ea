/* Nothing to include: this target only supplies two symbols to a static link (see the .c file). */
