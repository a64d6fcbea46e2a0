use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn def(kind: MapKind, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
    MapDef { kind, key_size, value_size, max_entries }
}

fn lookup(m: &Map, key: &[u8]) -> Option<Vec<u8>> {
    // SAFETY: key has key_size bytes (asserted by callers' construction).
    assert_eq!(key.len(), m.def.key_size as usize);
    let p = unsafe { m.lookup_raw(key.as_ptr()) };
    // SAFETY: a non-null lookup result points to value_size bytes.
    (!p.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(p, m.def.value_size as usize) }.to_vec())
}

#[test]
fn array_lookups_are_bounded_and_updates_land() {
    let m = Map::new("a", def(MapKind::Array, 4, 8, 4), 1).unwrap();
    assert_eq!(lookup(&m, &3u32.to_ne_bytes()), Some(vec![0; 8]));
    assert_eq!(lookup(&m, &4u32.to_ne_bytes()), None);
    m.update_copy(&2u32.to_ne_bytes(), &7u64.to_ne_bytes(), BPF_ANY).unwrap();
    assert_eq!(lookup(&m, &2u32.to_ne_bytes()), Some(7u64.to_ne_bytes().to_vec()));
    assert!(m.update_copy(&9u32.to_ne_bytes(), &[0; 8], BPF_ANY).is_err());
    assert!(m.update_copy(&1u32.to_ne_bytes(), &[0; 8], BPF_NOEXIST).is_err());
    assert!(m.delete_copy(&1u32.to_ne_bytes()).is_err());
    assert_eq!(m.entries().len(), 4);
}

#[test]
fn hash_respects_flags_and_capacity() {
    let m = Map::new("h", def(MapKind::Hash, 6, 4, 3), 1).unwrap();
    let k = |i: u8| [i, 0, 0, 0, 0, i];
    for i in 0..3 {
        m.update_copy(&k(i), &[i; 4], BPF_NOEXIST).unwrap();
    }
    assert!(m.update_copy(&k(9), &[9; 4], BPF_ANY).is_err(), "a full map refuses new keys");
    assert!(m.update_copy(&k(1), &[1; 4], BPF_NOEXIST).is_err());
    assert!(m.update_copy(&k(8), &[1; 4], BPF_EXIST).is_err());
    m.update_copy(&k(1), &[5; 4], BPF_EXIST).unwrap();
    assert_eq!(lookup(&m, &k(1)), Some(vec![5; 4]));
    m.delete_copy(&k(0)).unwrap();
    assert_eq!(lookup(&m, &k(0)), None);
    assert!(m.delete_copy(&k(0)).is_err());
    m.update_copy(&k(9), &[9; 4], BPF_ANY).unwrap();
    assert_eq!(m.len(), 3);
    let mut keys: Vec<_> = m.entries().into_iter().map(|e| e.key).collect();
    keys.sort();
    assert_eq!(keys, vec![k(1).to_vec(), k(2).to_vec(), k(9).to_vec()]);
}

#[test]
fn program_updates_zero_a_reused_slot() {
    let m = Map::new("h", def(MapKind::PerCpuHash, 4, 4, 2), 2).unwrap();
    m.update_copy(&[1; 4], &[7; 8], BPF_ANY).unwrap();
    m.delete_copy(&[1; 4]).unwrap();
    set_current_cpu(1);
    // SAFETY: 4-byte key and value.
    assert_eq!(unsafe { m.update_raw([1u8; 4].as_ptr(), [3u8; 4].as_ptr(), BPF_ANY) }, 0);
    set_current_cpu(0);
    assert_eq!(m.lookup_copy(&[1; 4]).unwrap(), Some(vec![vec![0; 4], vec![3; 4]]));
}

#[test]
fn per_cpu_array_separates_workers() {
    let m = Map::new("p", def(MapKind::PerCpuArray, 4, 8, 1), 3).unwrap();
    for cpu in 0..3u32 {
        set_current_cpu(cpu);
        let p = unsafe { m.lookup_raw(0u32.to_ne_bytes().as_ptr()) } as *mut u64;
        // SAFETY: an 8-byte value of this CPU.
        unsafe { *p += cpu as u64 + 1 };
    }
    set_current_cpu(0);
    let v = m.lookup_copy(&0u32.to_ne_bytes()).unwrap().unwrap();
    let got: Vec<u64> = v.iter().map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap())).collect();
    assert_eq!(got, vec![1, 2, 3]);
}

fn lpm_key(len: u32, addr: [u8; 4]) -> Vec<u8> {
    let mut k = len.to_ne_bytes().to_vec();
    k.extend_from_slice(&addr);
    k
}

#[test]
fn lpm_finds_the_longest_prefix() {
    let m = Map::new("routes", def(MapKind::LpmTrie, 8, 4, 16), 1).unwrap();
    m.update_copy(&lpm_key(8, [10, 0, 0, 0]), &[8; 4], BPF_ANY).unwrap();
    m.update_copy(&lpm_key(24, [10, 1, 2, 99]), &[24; 4], BPF_ANY).unwrap();
    m.update_copy(&lpm_key(0, [0; 4]), &[0; 4], BPF_ANY).unwrap();
    assert_eq!(lookup(&m, &lpm_key(32, [10, 1, 2, 3])), Some(vec![24; 4]));
    assert_eq!(lookup(&m, &lpm_key(32, [10, 1, 3, 3])), Some(vec![8; 4]));
    assert_eq!(lookup(&m, &lpm_key(32, [11, 1, 3, 3])), Some(vec![0; 4]));
    assert_eq!(
        lookup(&m, &lpm_key(16, [10, 1, 2, 3])),
        Some(vec![8; 4]),
        "the key's length caps the match"
    );
    m.delete_copy(&lpm_key(24, [10, 1, 2, 0])).unwrap();
    assert_eq!(lookup(&m, &lpm_key(32, [10, 1, 2, 3])), Some(vec![8; 4]));
    assert!(m.update_copy(&lpm_key(33, [0; 4]), &[0; 4], BPF_ANY).is_err());
}

#[test]
fn shapes_are_validated() {
    assert!(Map::new("x", def(MapKind::Array, 8, 4, 4), 1).is_err());
    assert!(Map::new("x", def(MapKind::Hash, 4, 0, 4), 1).is_err());
    assert!(Map::new("x", def(MapKind::Hash, 4, 4, 0), 1).is_err());
    assert!(Map::new("x", def(MapKind::DevMap, 4, 2, 4), 1).is_err());
    assert!(
        Map::new("x", def(MapKind::Hash, 4, 65536, 1 << 24), 1).is_err(),
        "over the memory limit"
    );
    assert!(MapKind::from_linux(9).unwrap_err().to_string().contains("lru_hash"));
}

#[test]
fn concurrent_inserts_never_duplicate_a_key() {
    let m = std::sync::Arc::new(Map::new("h", def(MapKind::Hash, 4, 8, 4096), 1).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..2000u32 {
                    let k = (i % 1500).to_ne_bytes();
                    // SAFETY: 4-byte key, 8-byte value.
                    let r = unsafe {
                        m.update_raw(k.as_ptr(), (t as u64).to_ne_bytes().as_ptr(), BPF_ANY)
                    };
                    assert!(r == 0 || r == -errno::EBUSY);
                    if i % 7 == 0 {
                        let _ = m.delete_copy(&k);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let keys: Vec<_> = m.entries().into_iter().map(|e| e.key).collect();
    let unique: std::collections::HashSet<_> = keys.iter().collect();
    assert_eq!(keys.len(), unique.len());
    assert_eq!(keys.len(), m.len());
}

proptest! {
    #[test]
    fn hash_behaves_like_a_hashmap(ops in proptest::collection::vec((0u8..3, 0u16..40, any::<u32>()), 1..300)) {
        let m = Map::new("h", def(MapKind::Hash, 2, 4, 24), 1).unwrap();
        let mut model: HashMap<u16, u32> = HashMap::new();
        for (op, k, v) in ops {
            let key = k.to_ne_bytes();
            match op {
                0 => {
                    let r = m.update_copy(&key, &v.to_ne_bytes(), BPF_ANY);
                    if model.contains_key(&k) || model.len() < 24 {
                        prop_assert!(r.is_ok());
                        model.insert(k, v);
                    } else {
                        prop_assert!(r.is_err());
                    }
                }
                1 => prop_assert_eq!(m.delete_copy(&key).is_ok(), model.remove(&k).is_some()),
                _ => prop_assert_eq!(lookup(&m, &key), model.get(&k).map(|v| v.to_ne_bytes().to_vec())),
            }
        }
        prop_assert_eq!(m.len(), model.len());
    }
}
