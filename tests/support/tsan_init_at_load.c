/* Preloaded behind libtsan.so into the Python-hosted tests of a TSan build
 * (tests/sanitizers.cmake).
 *
 * A preloaded TSan runtime initialises itself at the first call it intercepts. A program that
 * is not built with TSan and calls _setjmp before anything else intercepted (dash and bash do,
 * first thing in main) jumps through the runtime's _setjmp trampoline while its pointer to the
 * real _setjmp is still null, and dies of SIGSEGV: every shell a test or a rank starts.
 * Initialising the runtime when this library loads, before main, avoids that. */
void __tsan_init(void);

__attribute__((constructor)) static void initialise_tsan_before_main(void) { __tsan_init(); }
