//! The `jit` module of a build without the crate's `native` feature (no Cranelift): there is
//! no code generator. [`Jit::new`] says so ([`NativeError::NotBuilt`]), so a pipeline asked
//! to run natively runs on closures and reports why ([`super::Pipeline::native_error`]).
//! Every other type here is uninhabited: nothing can make one, so nothing can call into one.

use std::convert::Infallible;
use std::marker::PhantomData;

pub(crate) use super::engine::{Body, Whole};
pub use super::engine::{Engine, NativeError, NATIVE_MAX_SIZE};
use super::{Compiler, Ctx, StmtFn};
use crate::ir::Stmt;

/// The code generator this build does not have.
pub(crate) struct Jit(Infallible);

/// A block compiled but not yet finalised: never, here.
pub(crate) struct Pending(Infallible);

/// A whole packet's native code: never, here.
pub(crate) struct WholeCode(Infallible);

/// Whole packets in one frame: never, here.
pub(crate) struct WholeRun<'r>(Infallible, PhantomData<&'r mut ()>);

/// Machine code of a pipeline: never, here.
#[derive(Debug)]
pub struct NativeCode(Infallible);

impl Jit {
    /// There is no code generator in this build.
    pub fn new() -> Result<Self, NativeError> {
        Err(NativeError::NotBuilt)
    }

    pub fn compile(&mut self, _: &Compiler<'_>, _: &[Stmt]) -> Result<Pending, NativeError> {
        match self.0 {}
    }

    pub fn compile_body(
        &mut self,
        _: &Compiler<'_>,
        _: Body<'_>,
    ) -> Result<Option<Pending>, NativeError> {
        match self.0 {}
    }

    pub fn finalize(&mut self) -> Result<(), NativeError> {
        match self.0 {}
    }

    pub fn stmt_fn(&self, _: &Pending) -> StmtFn {
        match self.0 {}
    }

    pub fn whole_code(&self, _: &Pending) -> WholeCode {
        match self.0 {}
    }

    pub fn set_actions(&mut self, _: &[Option<Pending>]) {
        match self.0 {}
    }

    pub fn into_code(self) -> NativeCode {
        match self.0 {}
    }
}

impl WholeCode {
    pub fn call(&self, _: &mut Ctx<'_>, _: u32, _: u32) -> Whole {
        match self.0 {}
    }

    pub fn begin<'r>(&'r self, _: &'r mut Ctx<'_>) -> WholeRun<'r> {
        match self.0 {}
    }
}

impl WholeRun<'_> {
    /// # Safety
    /// As for the native engine's `WholeRun::packet`; this one cannot exist.
    pub unsafe fn packet(&mut self, _: *mut u8, _: usize, _: usize, _: u32) -> Whole {
        match self.0 {}
    }

    pub fn payload(&self) -> usize {
        match self.0 {}
    }

    pub fn slot(&self, _: usize) -> u64 {
        match self.0 {}
    }

    pub fn out(&self) -> &[u8] {
        match self.0 {}
    }
}
