//! A zeroed, page-aligned byte buffer: what O_DIRECT needs, and harmless otherwise. Linux AIO
//! (`transfer`) and `ringio read` use it.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};

/// `len` bytes aligned to 4096.
#[derive(Debug)]
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is uniquely owned; access goes through &self / &mut self.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least one page). Aborts when memory is short: for
    /// buffers of a size the caller chose; [`AlignedBuf::try_new`] where the user did.
    pub fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len.max(4096), 4096).expect("sane buffer size");
        Self::try_new(len).unwrap_or_else(|_| alloc::handle_alloc_error(layout))
    }

    /// A zeroed buffer of `len` bytes (at least one page), or ENOMEM.
    pub fn try_new(len: usize) -> std::io::Result<Self> {
        let nomem = || std::io::Error::from_raw_os_error(libc::ENOMEM);
        let layout = Layout::from_size_align(len.max(4096), 4096).map_err(|_| nomem())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(nomem());
        }
        Ok(AlignedBuf { ptr, layout })
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `layout.size()` initialized (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}
