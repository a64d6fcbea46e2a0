/* hotplane's core.p4: the declarations every P4_16 program may use (P4_16 specification,
 * appendix "core library"). Shipped inside hotplane so that `#include <core.p4>` works with no
 * compiler installed. */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors the parser can signal; programs may add their own with further `error` declarations. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet being parsed. */
extern packet_in {
    /* Copy the next bits of the packet into a fixed-size header and make it valid. */
    void extract<T>(out T hdr);
    /* As above for a header with one varbit field of the given size in bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Read the next bits of the packet without consuming them. */
    T lookahead<T>();
    /* Skip bits of the packet. */
    void advance(in bit<32> sizeInBits);
    /* Length of the whole packet in bytes. */
    bit<32> length();
}

/* The packet being built by a deparser. */
extern packet_out {
    /* Append a header if it is valid (for structs and stacks: each valid member, in order). */
    void emit<T>(in T hdr);
}

/* Stop parsing with `toSignal` unless `check` holds. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing, the usual default. */
@noWarn("unused")
action NoAction() {}

/* The match kinds every target supports. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif /* _CORE_P4_ */
