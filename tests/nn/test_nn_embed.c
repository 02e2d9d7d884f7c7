#include "tests/nn/nn_test.h"
static void test_todo(void) {}
TH_MAIN(TH_TEST(test_todo))
