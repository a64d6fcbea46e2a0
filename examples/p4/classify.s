# For examples/p4/ebpf_extern.p4: sees a 20-byte IPv4 header as its packet. UDP gets DSCP EF
# (diffserv 0xb8) and passes; ICMP is dropped; everything else passes unchanged.
ldxw %r2, [%r1+0]
ldxw %r3, [%r1+4]
mov %r4, %r2
add %r4, 20
jgt %r4, %r3, pass
ldxb %r5, [%r2+9]
jeq %r5, 1, drop
jne %r5, 17, pass
mov %r6, 0xb8
stxb [%r2+1], %r6
pass:
mov %r0, 2
exit
drop:
mov %r0, 1
exit
