//! The verifier's view of a scalar: unsigned and signed 64-bit ranges plus known bits (a "tnum":
//! `value` holds the known bits, `mask` the unknown ones), kept consistent with each other as in
//! the Linux verifier. Constants are exact, so loops with constant bounds verify by unrolling.

/// Known bits: a bit is known when it is clear in `mask`, and then equals the bit of `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

// Operations named after the instructions they model; not operator traits, which would hide
// that they are over-approximations.
#[allow(clippy::should_implement_trait)]
impl Tnum {
    pub const UNKNOWN: Tnum = Tnum { value: 0, mask: u64::MAX };

    pub const fn constant(v: u64) -> Self {
        Self { value: v, mask: 0 }
    }

    /// The tightest tnum containing every value of [min, max].
    pub fn range(min: u64, max: u64) -> Self {
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits > 63 {
            return Self::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Self { value: min & !delta, mask: delta }
    }

    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    pub fn add(self, o: Self) -> Self {
        let sm = self.mask.wrapping_add(o.mask);
        let sv = self.value.wrapping_add(o.value);
        let sigma = sm.wrapping_add(sv);
        let chi = sigma ^ sv;
        let mu = chi | self.mask | o.mask;
        Self { value: sv & !mu, mask: mu }
    }

    pub fn sub(self, o: Self) -> Self {
        let dv = self.value.wrapping_sub(o.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(o.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | o.mask;
        Self { value: dv & !mu, mask: mu }
    }

    pub fn and(self, o: Self) -> Self {
        let alpha = self.value | self.mask;
        let beta = o.value | o.mask;
        let v = self.value & o.value;
        Self { value: v, mask: alpha & beta & !v }
    }

    pub fn or(self, o: Self) -> Self {
        let v = self.value | o.value;
        let mu = self.mask | o.mask;
        Self { value: v, mask: mu & !v }
    }

    pub fn xor(self, o: Self) -> Self {
        let v = self.value ^ o.value;
        let mu = self.mask | o.mask;
        Self { value: v & !mu, mask: mu }
    }

    pub fn shl(self, k: u32) -> Self {
        Self { value: self.value.wrapping_shl(k), mask: self.mask.wrapping_shl(k) }
    }

    pub fn shr(self, k: u32) -> Self {
        Self { value: self.value.wrapping_shr(k), mask: self.mask.wrapping_shr(k) }
    }

    pub fn intersect(self, o: Self) -> Self {
        let v = self.value | o.value;
        let mu = self.mask & o.mask;
        Self { value: v & !mu, mask: mu }
    }

    /// Every value of `o` is a value of `self`.
    pub fn contains(self, o: Self) -> bool {
        o.mask & !self.mask == 0 && o.value & !self.mask == self.value
    }

    /// The low 32 bits, zero-extended.
    pub fn low32(self) -> Self {
        Self { value: self.value as u32 as u64, mask: self.mask as u32 as u64 }
    }
}

/// A scalar value: everything the verifier knows about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scalar {
    pub umin: u64,
    pub umax: u64,
    pub smin: i64,
    pub smax: i64,
    pub t: Tnum,
}

impl Scalar {
    pub const UNKNOWN: Scalar =
        Scalar { umin: 0, umax: u64::MAX, smin: i64::MIN, smax: i64::MAX, t: Tnum::UNKNOWN };

    pub fn constant(v: u64) -> Self {
        Self { umin: v, umax: v, smin: v as i64, smax: v as i64, t: Tnum::constant(v) }
    }

    /// Any value of [lo, hi] (unsigned).
    pub fn urange(lo: u64, hi: u64) -> Self {
        let mut s = Self { umin: lo, umax: hi, ..Self::UNKNOWN };
        s.sync();
        s
    }

    /// The value zero-extended from 32 bits, nothing else known.
    pub fn unknown32() -> Self {
        Self::urange(0, u32::MAX as u64)
    }

    pub fn as_const(&self) -> Option<u64> {
        (self.umin == self.umax).then_some(self.umin)
    }

    /// Whether the facts contradict each other (no value satisfies them): a dead branch.
    pub fn is_empty(&self) -> bool {
        self.umin > self.umax || self.smin > self.smax
    }

    /// Make ranges and known bits agree, tightening each from the others.
    pub fn sync(&mut self) {
        for _ in 0..2 {
            // known bits -> ranges
            self.umin = self.umin.max(self.t.value);
            self.umax = self.umax.min(self.t.value | self.t.mask);
            self.smin = self.smin.max((self.t.value | (self.t.mask & (1 << 63))) as i64);
            self.smax = self.smax.min((self.t.value | (self.t.mask & !(1 << 63))) as i64);
            // unsigned <-> signed, where the range does not cross the sign boundary
            if (self.umin as i64) >= 0 && (self.umax as i64) >= 0
                || (self.umin as i64) < 0 && (self.umax as i64) < 0
            {
                self.smin = self.smin.max(self.umin as i64);
                self.smax = self.smax.min(self.umax as i64);
            }
            if self.smin >= 0 || self.smax < 0 {
                self.umin = self.umin.max(self.smin as u64);
                self.umax = self.umax.min(self.smax as u64);
            }
            if self.umin <= self.umax {
                self.t = self.t.intersect(Tnum::range(self.umin, self.umax));
            }
        }
    }

    /// Every value of `o` is a value of `self`.
    pub fn contains(&self, o: &Scalar) -> bool {
        self.umin <= o.umin
            && o.umax <= self.umax
            && self.smin <= o.smin
            && o.smax <= self.smax
            && self.t.contains(o.t)
    }

    /// The low 32 bits as a scalar (zero-extended).
    pub fn low32(&self) -> Scalar {
        if self.umax <= u32::MAX as u64 {
            return *self;
        }
        let mut s = Scalar { t: self.t.low32(), ..Scalar::unknown32() };
        s.sync();
        s
    }

    fn from_tnum(t: Tnum) -> Scalar {
        let mut s = Scalar { t, ..Scalar::UNKNOWN };
        s.sync();
        s
    }

    pub fn add(&self, o: &Scalar) -> Scalar {
        let mut r = Scalar::from_tnum(self.t.add(o.t));
        if let (Some(lo), Some(hi)) = (self.umin.checked_add(o.umin), self.umax.checked_add(o.umax))
        {
            r.umin = r.umin.max(lo);
            r.umax = r.umax.min(hi);
        }
        if let (Some(lo), Some(hi)) = (self.smin.checked_add(o.smin), self.smax.checked_add(o.smax))
        {
            r.smin = r.smin.max(lo);
            r.smax = r.smax.min(hi);
        }
        r.sync();
        r
    }

    pub fn sub(&self, o: &Scalar) -> Scalar {
        let mut r = Scalar::from_tnum(self.t.sub(o.t));
        if self.umin >= o.umax {
            r.umin = r.umin.max(self.umin - o.umax);
            r.umax = r.umax.min(self.umax - o.umin);
        }
        if let (Some(lo), Some(hi)) = (self.smin.checked_sub(o.smax), self.smax.checked_sub(o.smin))
        {
            r.smin = r.smin.max(lo);
            r.smax = r.smax.min(hi);
        }
        r.sync();
        r
    }

    pub fn mul(&self, o: &Scalar) -> Scalar {
        if let (Some(a), Some(b)) = (self.as_const(), o.as_const()) {
            return Scalar::constant(a.wrapping_mul(b));
        }
        match self.umax.checked_mul(o.umax) {
            Some(hi) => Scalar::urange(self.umin.saturating_mul(o.umin), hi),
            None => Scalar::UNKNOWN,
        }
    }

    pub fn and(&self, o: &Scalar) -> Scalar {
        let mut r = Scalar::from_tnum(self.t.and(o.t));
        r.umax = r.umax.min(self.umax).min(o.umax);
        r.sync();
        r
    }

    pub fn or(&self, o: &Scalar) -> Scalar {
        let mut r = Scalar::from_tnum(self.t.or(o.t));
        r.umin = r.umin.max(self.umin).max(o.umin);
        r.sync();
        r
    }

    pub fn xor(&self, o: &Scalar) -> Scalar {
        Scalar::from_tnum(self.t.xor(o.t))
    }

    pub fn shl(&self, k: u32) -> Scalar {
        if self.umax.leading_zeros() >= k {
            let mut r = Scalar::from_tnum(self.t.shl(k));
            r.umin = r.umin.max(self.umin << k);
            r.umax = r.umax.min(self.umax << k);
            r.sync();
            r
        } else {
            Scalar::from_tnum(self.t.shl(k))
        }
    }

    pub fn shr(&self, k: u32) -> Scalar {
        let mut r = Scalar::from_tnum(self.t.shr(k));
        r.umin = r.umin.max(self.umin >> k);
        r.umax = r.umax.min(self.umax >> k);
        r.sync();
        r
    }

    pub fn div(&self, o: &Scalar) -> Scalar {
        match (self.as_const(), o.as_const()) {
            (Some(a), Some(b)) => Scalar::constant(a.checked_div(b).unwrap_or(0)),
            (_, Some(b)) if b != 0 => Scalar::urange(self.umin / b, self.umax / b),
            _ => Scalar::urange(0, self.umax),
        }
    }

    pub fn rem(&self, o: &Scalar) -> Scalar {
        match (self.as_const(), o.as_const()) {
            (Some(a), Some(b)) => Scalar::constant(if b == 0 { a } else { a % b }),
            // x % y < y, and x % y <= x; by zero leaves x.
            _ if o.umin > 0 => Scalar::urange(0, self.umax.min(o.umax - 1)),
            _ => Scalar::urange(0, self.umax),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tnum_arithmetic_is_sound_on_samples() {
        let a = Tnum::range(4, 7);
        let b = Tnum::constant(3);
        for x in 4..=7u64 {
            assert!(a.add(b).contains(Tnum::constant(x + 3)));
            assert!(a.sub(b).contains(Tnum::constant(x - 3)));
            assert!(a.and(b).contains(Tnum::constant(x & 3)));
            assert!(a.or(b).contains(Tnum::constant(x | 3)));
            assert!(a.xor(b).contains(Tnum::constant(x ^ 3)));
        }
    }

    #[test]
    fn masking_bounds_the_value() {
        let s = Scalar::UNKNOWN.and(&Scalar::constant(0xff));
        assert_eq!((s.umin, s.umax), (0, 255));
        let s = Scalar::urange(10, 20).add(&Scalar::constant(5));
        assert_eq!((s.umin, s.umax), (15, 25));
        let s = Scalar::urange(0, 15).shl(3);
        assert_eq!((s.umin, s.umax), (0, 120));
        assert_eq!(Scalar::constant(7).rem(&Scalar::constant(3)).as_const(), Some(1));
        assert!(Scalar::urange(5, 3).is_empty());
    }

    proptest::proptest! {
        #[test]
        fn scalar_ops_contain_their_concrete_results(a in 0u64..1000, b in 0u64..1000, da in 0u64..50, db in 0u64..50) {
            let (x, y) = (Scalar::urange(a, a + da), Scalar::urange(b, b + db));
            for (va, vb) in [(a, b), (a + da, b + db), (a + da / 2, b)] {
                proptest::prop_assert!(x.add(&y).contains(&Scalar::constant(va + vb)));
                proptest::prop_assert!(x.mul(&y).contains(&Scalar::constant(va * vb)));
                proptest::prop_assert!(x.and(&y).contains(&Scalar::constant(va & vb)));
                proptest::prop_assert!(x.or(&y).contains(&Scalar::constant(va | vb)));
                proptest::prop_assert!(x.xor(&y).contains(&Scalar::constant(va ^ vb)));
                proptest::prop_assert!(x.div(&y).contains(&Scalar::constant(va.checked_div(vb).unwrap_or(0))));
                let rem = if vb == 0 { va } else { va % vb };
                proptest::prop_assert!(x.rem(&y).contains(&Scalar::constant(rem)));
                if va >= vb {
                    proptest::prop_assert!(x.sub(&y).contains(&Scalar::constant(va - vb)));
                }
            }
        }
    }
}
