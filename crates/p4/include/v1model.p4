/* hotplane's v1model.p4: the v1model architecture (BMv2 simple_switch), with the same
 * declarations as p4c's so that programs written for it compile unchanged. hotplane runs it
 * natively; docs/p4.md says which externs are implemented and how. */
#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include <core.p4>

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20200408
#endif

match_kind {
    range,
    optional,
    selector
}

/* Per-packet metadata the architecture fills in and reads back. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    bit<9>  ingress_port;
    bit<9>  egress_spec;      /* set by ingress: where the packet goes; 511 drops */
    bit<9>  egress_port;      /* the port egress processing runs for */
    bit<32> instance_type;    /* 0 normal, 1/2 ingress/egress clone, 4 recirculated, 5 replicated, 6 resubmitted */
    bit<32> packet_length;
    bit<32> enq_timestamp;
    bit<19> enq_qdepth;
    bit<32> deq_timedelta;
    bit<19> deq_qdepth;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
    bit<16> mcast_grp;        /* non-zero at the end of ingress: replicate to this group */
    bit<16> egress_rid;       /* replication id of a multicast copy */
    bit<1>  checksum_error;   /* set by a failing verify_checksum */
    error   parser_error;
    bit<3>  priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of `size` counters indexed by the program. */
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}

/* One counter per entry of the table it is attached to (`counters = name;`). */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* An array of two-rate three-colour meters (RFC 2698). */
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}

/* One meter per entry of the table it is attached to (`meters = name;`). */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of `size` values of type T, kept across packets. */
extern register<T> {
    register(bit<32> size);
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}

extern action_profile {
    action_profile(bit<32> size);
}

/* A random number in [lo, hi]. */
extern void random<T>(out T result, in T lo, in T hi);

/* Send `data` to the control plane. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Drop the packet at the end of this pipeline unless later code changes egress_spec. */
extern void mark_to_drop(inout standard_metadata_t standard_metadata);
/* The form programs written before 2018 use; it drops through the current standard_metadata. */
extern void mark_to_drop();

/* result = base + (hash(data) % max), or base when max is 0. */
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* Set standard_metadata.checksum_error if `checksum` is not the checksum of `data`. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
/* checksum = the checksum of `data`, if `condition`. */
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
/* As above, with the unparsed payload appended to `data`. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Start ingress again with the original packet (and these metadata fields preserved). */
extern void resubmit<T>(in T data);
extern void resubmit_preserving_field_list(bit<8> index);
/* Send the deparsed packet through the pipeline again. */
extern void recirculate<T>(in T data);
extern void recirculate_preserving_field_list(bit<8> index);
/* Copy the packet to the mirror session `session`. */
extern void clone(in CloneType type, in bit<32> session);
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Send only the first `length` bytes. */
extern void truncate(in bit<32> length);

/* Debugging aids. */
extern void assert(in bool check);
extern void assume(in bool check);
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The architecture. H: a struct of headers, stacks and unions; M: the user's metadata. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

control VerifyChecksum<H, M>(inout H hdr, inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

control ComputeChecksum<H, M>(inout H hdr, inout M meta);

@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#endif /* _V1_MODEL_P4_ */
