# Targets for deploy/: included by the Makefile. TEST_DEPS lists what `make
# test` needs from here.
TEST_DEPS +=
