/* hotplane.p4: hotplane's extensions to v1model. Include after <v1model.p4>.
 * docs/p4.md describes each extern; examples/p4/ has a program for each. */
#ifndef _HOTPLANE_P4_
#define _HOTPLANE_P4_

#include <v1model.p4>

#endif /* _HOTPLANE_P4_ */
