#define A(x) x x
#define B A(A(A(1)))
#if defined(B) && B
const bit<8> c = B;
#endif
