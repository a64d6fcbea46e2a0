//! Zero-initialised, cache-line (or huge-page) aligned arrays of words (atomic ones, shared by
//! workers; or plain ones, owned by one lock holder at a time): the storage of every table. Large arrays are allocated lazily by the kernel (zeroed pages on first touch)
//! and marked for transparent huge pages, which is what keeps a 64 MiB DIR-24-8 level or a
//! 2^24-entry hash table from paying a TLB miss per lookup.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Word types whose all-zero bit pattern is a valid value.
///
/// # Safety
/// Implementors must be valid when zero-initialised.
pub unsafe trait ZeroValid: Sync + Send {}
// SAFETY: atomics have the layout of their integer, for which zero is a valid value.
unsafe impl ZeroValid for AtomicU32 {}
// SAFETY: as above.
unsafe impl ZeroValid for AtomicU64 {}
// SAFETY: plain integers (and arrays of them) are valid when zero, and Send + Sync.
unsafe impl ZeroValid for u64 {}
// SAFETY: as above.
unsafe impl<const N: usize> ZeroValid for [u64; N] {}

const HUGE_PAGE: usize = 2 << 20;
/// Arrays from this size on are mapped rather than allocated: the allocator zeroes an aligned
/// allocation by writing it (every page resident at once), a fresh mapping is zero pages the
/// kernel provides on first touch.
const MAP_FROM: usize = 256 << 10;

/// A fixed-length, zeroed, aligned array.
pub struct WordArray<T: ZeroValid> {
    ptr: NonNull<T>,
    len: usize,
    backing: Backing,
}

enum Backing {
    Heap(Layout),
    /// An anonymous mapping (`base`, `bytes`), over-allocated by a huge page so that the array
    /// starts on a huge-page boundary.
    Mapped {
        base: *mut libc::c_void,
        bytes: usize,
    },
}

// SAFETY: the array owns its elements, which are Send + Sync (`ZeroValid`); a shared reference
// hands out only shared references to them, and `&mut` access needs the array exclusively.
unsafe impl<T: ZeroValid> Send for WordArray<T> {}
// SAFETY: as above.
unsafe impl<T: ZeroValid> Sync for WordArray<T> {}

/// The allocation failed (the size is beyond what the machine can map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate {bytes} bytes of table storage")]
pub struct AllocError {
    pub bytes: usize,
}

impl<T: ZeroValid> WordArray<T> {
    pub fn zeroed(len: usize) -> Result<Self, AllocError> {
        let elem = std::mem::size_of::<T>();
        let bytes = len.max(1).checked_mul(elem).ok_or(AllocError { bytes: usize::MAX })?;
        if bytes >= MAP_FROM {
            return Self::mapped(len, bytes);
        }
        let layout = Layout::from_size_align(bytes, 64).map_err(|_| AllocError { bytes })?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw as *mut T).ok_or(AllocError { bytes })?;
        Ok(Self { ptr, len, backing: Backing::Heap(layout) })
    }

    /// Large arrays: a fresh anonymous mapping (zero pages on first touch), aligned to and
    /// advised for transparent huge pages *before* any page is touched (the allocator's
    /// `alloc_zeroed` would write every page first, leaving 4 KiB pages behind).
    fn mapped(len: usize, bytes: usize) -> Result<Self, AllocError> {
        let total = bytes.checked_add(HUGE_PAGE).ok_or(AllocError { bytes })?;
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(AllocError { bytes });
        }
        let aligned = (base as usize).next_multiple_of(HUGE_PAGE);
        // SAFETY: advisory only, on the mapping just created; failure (no THP) is harmless.
        unsafe { libc::madvise(aligned as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE) };
        let ptr = NonNull::new(aligned as *mut T).ok_or(AllocError { bytes })?;
        Ok(Self { ptr, len, backing: Backing::Mapped { base, bytes: total } })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (virtual; pages are touched on first write).
    pub fn bytes(&self) -> usize {
        match self.backing {
            Backing::Heap(l) => l.size(),
            Backing::Mapped { bytes, .. } => bytes,
        }
    }
}

impl<T: ZeroValid> std::ops::Deref for WordArray<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` zero-initialised `T`s (valid by `ZeroValid`) that live
        // until drop.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> std::ops::DerefMut for WordArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference to the elements.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> Drop for WordArray<T> {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: allocated in `zeroed` with exactly this layout.
            Backing::Heap(layout) => unsafe {
                std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout)
            },
            // SAFETY: the whole mapping made in `mapped`, unmapped once.
            Backing::Mapped { base, bytes } => unsafe {
                libc::munmap(base, bytes);
            },
        }
    }
}
