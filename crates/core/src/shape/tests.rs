//! Packet shapes: the JSON form, its errors, and the lattice laws on random shapes, checked
//! against concrete packets drawn from the shapes.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn shape(len: (u32, u32), bytes: &[(u16, &str)]) -> PacketShape {
    let mut s = PacketShape::with_len(len.0, len.1);
    for (o, text) in bytes {
        s.set_byte(*o, text.parse().unwrap());
    }
    s
}

#[test]
fn the_briefs_json_parses_and_prints_back_the_same() {
    let text = r#"{"len":[98,1518],"bytes":{"12":"86","13":"dd","14":"6?"}}"#;
    let s = PacketShape::from_json(text).unwrap();
    assert_eq!(s.len, (98, 1518));
    assert_eq!(s.byte(12), ByteFact::known(0x86));
    assert_eq!(s.byte(13), ByteFact::known(0xdd));
    assert_eq!(s.byte(14), ByteFact { value: 0x60, mask: 0x0f });
    assert_eq!(s.byte(15), ByteFact::UNKNOWN);
    assert_eq!(s.to_json(), text);
    // Offsets print in numeric order, not as sorted text ("130" after "14").
    let s = shape((0, 200), &[(130, "01"), (14, "02"), (2, "03")]);
    assert_eq!(s.to_json(), r#"{"len":[0,200],"bytes":{"2":"03","14":"02","130":"01"}}"#);
}

#[test]
fn partly_known_nibbles_use_the_bit_form() {
    let f: ByteFact = "0110??01".parse().unwrap();
    assert_eq!(f, ByteFact { value: 0x61, mask: 0x0c });
    assert_eq!(f.to_string(), "0110??01");
    assert_eq!("?5".parse::<ByteFact>().unwrap(), ByteFact { value: 0x05, mask: 0xf0 });
    assert_eq!("AB".parse::<ByteFact>().unwrap().to_string(), "ab");
    assert_eq!(ByteFact::new(0, 0xf0).to_string(), "?0");
    for bad in ["", "1", "123", "8g", "0110?2?1", "01100110x", "é1"] {
        assert!(bad.parse::<ByteFact>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn bad_json_gives_typed_errors() {
    let err = |t: &str| PacketShape::from_json(t).unwrap_err();
    assert!(matches!(err(r#"{"len":[5,3]}"#), ShapeError::EmptyLen { min: 5, max: 3 }));
    assert!(
        matches!(err(r#"{"len":[0,9],"bytes":{"x":"00"}}"#), ShapeError::Offset(o) if o == "x")
    );
    assert!(matches!(err(r#"{"len":[0,9],"bytes":{"70000":"00"}}"#), ShapeError::Offset(_)));
    assert!(matches!(
        err(r#"{"len":[0,9],"bytes":{"3":"0g"}}"#),
        ShapeError::Byte { offset: 3, .. }
    ));
    assert!(matches!(err(r#"{"len":[0,9],"extra":1}"#), ShapeError::Json(_)));
    assert!(matches!(err(r#"{"len":[-1,9]}"#), ShapeError::Json(_)));
    assert!(matches!(err("not json"), ShapeError::Json(_)));
    let g = Guarantee::from_json(r#"{"shapes":[{"len":[0,9]},{"len":[9,1]}]}"#).unwrap_err();
    assert!(matches!(g, ShapeError::InShape { index: 1, .. }), "{g}");
    // Hostile sizes: a minimum no packet has, more facts than any parser reads.
    assert!(matches!(err(r#"{"len":[65536,70000]}"#), ShapeError::TooLong { min: 65536 }));
    let many: Vec<String> = (0..2000).map(|o| format!("\"{o}\":\"0?\"")).collect();
    let many = format!(r#"{{"len":[64,65535],"bytes":{{{}}}}}"#, many.join(","));
    assert!(matches!(err(&many), ShapeError::TooManyFacts { count: 2000 }));
}

#[test]
fn guarantees_read_both_forms_and_round_trip() {
    let one = Guarantee::from_json(r#"{"len":[14,60],"bytes":{"12":"08"}}"#).unwrap();
    assert_eq!(one.shapes, vec![shape((14, 60), &[(12, "08")])]);
    let two = Guarantee::from_json(
        r#"{"shapes":[{"len":[14,60],"bytes":{"12":"08"}},{"len":[61,99],"bytes":{"12":"86"}}]}"#,
    )
    .unwrap();
    assert_eq!(two.shapes.len(), 2);
    assert_eq!(Guarantee::from_json(&two.to_json()).unwrap(), two);
}

#[test]
fn facts_past_every_packet_are_dropped_and_survive_joins_with_short_shapes() {
    // Byte 70 cannot exist in packets of at most 60 bytes.
    let mut s = shape((14, 60), &[(70, "00"), (12, "08")]);
    s.normalise();
    assert_eq!(s, shape((14, 60), &[(12, "08")]));
    let parsed = PacketShape::from_json(r#"{"len":[14,60],"bytes":{"70":"00"}}"#).unwrap();
    assert!(parsed.bytes.is_empty());
    // Packets of the short shape never reach byte 90: the long shape's fact holds for all.
    let long = shape((100, 200), &[(90, "11"), (12, "08")]);
    let short = shape((14, 60), &[(12, "86")]);
    let j = long.join(&short);
    assert_eq!(j.len, (14, 200));
    assert_eq!(j.byte(90), ByteFact::known(0x11));
    assert_eq!(j.byte(12), ByteFact::known(0x08).join(ByteFact::known(0x86)));
}

#[test]
fn adding_merges_touching_lengths_and_caps_the_disjuncts() {
    let mut g = Guarantee::bottom();
    g.add(PacketShape::with_len(14, 73));
    g.add(PacketShape::with_len(74, 1518));
    assert_eq!(g.shapes, vec![PacketShape::with_len(14, 1518)]);
    // A shape a disjunct already covers adds nothing.
    g.add(shape((80, 90), &[(12, "86")]));
    assert_eq!(g.shapes.len(), 1);

    let mut g = Guarantee::bottom();
    let added: Vec<PacketShape> =
        (0..20u8).map(|k| shape((60, 100), &[(k as u16, "00"), (40, "ff")])).collect();
    for s in &added {
        g.add(s.clone());
    }
    assert!(g.shapes.len() <= MAX_SHAPES);
    for s in &added {
        assert!(Guarantee::of(s.clone()).implies(&g), "{s} lost");
    }
    // What every disjunct shares survives the merging.
    assert!(g.shapes.iter().all(|s| s.byte(40) == ByteFact::known(0xff)));
}

#[test]
fn restrict_keeps_only_the_used_bits() {
    let s = shape((74, 1518), &[(12, "86"), (13, "dd"), (20, "06")]);
    let used = UsedFacts { len: false, bits: BTreeMap::from([(12, 0xff), (20, 0xf0)]) };
    let r = s.restrict(&used);
    assert_eq!(r.len, (0, u32::MAX));
    assert_eq!(r.byte(12), ByteFact::known(0x86));
    assert_eq!(r.byte(13), ByteFact::UNKNOWN);
    assert_eq!(r.byte(20), ByteFact { value: 0, mask: 0x0f });
    assert!(s.implies(&r));
    let with_len = s.restrict(&UsedFacts { len: true, ..used });
    assert_eq!(with_len.len, (74, 1518));
}

fn arb_shape() -> impl Strategy<Value = PacketShape> {
    (
        0u32..80,
        0u32..80,
        proptest::collection::btree_map(0u16..48, (any::<u8>(), any::<u8>()), 0..6),
    )
        .prop_map(|(min, width, bytes)| {
            let mut s = PacketShape::with_len(min, min + width);
            for (o, (v, m)) in bytes {
                // Mostly known bytes, some partly known.
                s.set_byte(o, ByteFact::new(v, m & 0x0f));
            }
            s.normalise();
            s
        })
}

/// A concrete packet of shape `s`: length picked by `pick`, unknown bits from `noise`.
fn sample(s: &PacketShape, pick: u32, noise: &[u8]) -> Vec<u8> {
    let len = s.len.0 + pick % (s.len.1 - s.len.0 + 1);
    (0..len as usize)
        .map(|i| {
            let n = noise[i % noise.len()];
            let f = s.byte(i as u16);
            (n & f.mask) | f.value
        })
        .collect()
}

proptest! {
    #[test]
    fn join_is_an_upper_bound_and_commutes(
        a in arb_shape(), b in arb_shape(), pick in any::<u32>(), noise in proptest::collection::vec(any::<u8>(), 1..64)
    ) {
        let j = a.join(&b);
        prop_assert!(a.implies(&a));
        prop_assert!(a.implies(&j), "{a} not under {j}");
        prop_assert!(b.implies(&j));
        prop_assert_eq!(&j, &b.join(&a));
        prop_assert_eq!(&a.join(&a), &a);
        for s in [&a, &b] {
            let p = sample(s, pick, &noise);
            prop_assert!(s.admits(&p));
            prop_assert!(j.admits(&p), "{s} sample {p:02x?} not in {j}");
        }
        if a.implies(&b) {
            prop_assert!(j.implies(&b) && b.implies(&j));
            prop_assert!(b.admits(&sample(&a, pick, &noise)));
        }
    }

    #[test]
    fn json_round_trips(a in arb_shape()) {
        let back = PacketShape::from_json(&a.to_json()).unwrap();
        prop_assert_eq!(&back, &a);
    }

    #[test]
    fn guarantees_cover_every_added_shape(
        shapes in proptest::collection::vec(arb_shape(), 1..20),
        other in arb_shape(),
        pick in any::<u32>(),
        noise in proptest::collection::vec(any::<u8>(), 1..64),
    ) {
        let mut g = Guarantee::bottom();
        for s in &shapes {
            g.add(s.clone());
        }
        prop_assert!(g.shapes.len() <= MAX_SHAPES);
        for s in &shapes {
            prop_assert!(g.admits(&sample(s, pick, &noise)), "{s} sample not in {g}");
        }
        let joined = g.join(&Guarantee::of(other.clone()));
        prop_assert!(g.implies(&joined));
        prop_assert!(joined.admits(&sample(&other, pick, &noise)));
        let hull = g.hull().unwrap();
        prop_assert!(g.implies(&Guarantee::of(hull)));
        prop_assert_eq!(Guarantee::from_json(&g.to_json()).unwrap(), g);
    }
}

proptest! {
    /// Text near the JSON form (valid shapes with characters replaced, and soup of the
    /// characters it uses) gives a typed error or a shape, never a panic.
    #[test]
    fn arbitrary_text_never_panics(
        a in arb_shape(),
        edits in proptest::collection::vec((any::<usize>(), "[{}\\[\\],:\"0-9a-f?x -]"), 0..4),
        soup in "[{}\\[\\],:\"0-9a-f?lenbytshap -]{0,60}",
    ) {
        let mut text: Vec<char> = Guarantee::of(a).to_json().chars().collect();
        for (at, c) in edits {
            let at = at % text.len();
            text[at] = c.chars().next().unwrap_or(' ');
        }
        let text: String = text.into_iter().collect();
        for t in [text.as_str(), soup.as_str()] {
            if let Ok(s) = PacketShape::from_json(t) {
                prop_assert_eq!(PacketShape::from_json(&s.to_json()).unwrap(), s);
            }
            if let Ok(g) = Guarantee::from_json(t) {
                prop_assert_eq!(Guarantee::from_json(&g.to_json()).unwrap(), g);
            }
        }
    }
}
