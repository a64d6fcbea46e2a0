/* ecn.p4 with the threshold at 0 (see tests/p4/ecn_marking.stf). */
#define ECN_THRESHOLD 0
#include "ecn.p4"
