//! Stage 6: (typed call, policy) -> an authorized action, or a denial.
//!
//! [`Authorized<A>`] has a private field and no public constructor: [`authorize`] is the
//! only way to make one, and it always goes through the action's own [`Rules`]. The
//! executors accept nothing else: their signatures are the proof that authorization ran
//! (README.md, "Code map").
//!
//! ```text
//!  call C ──> authorize::<A, C>(policy, call) ── A::check(policy, call) ──> Ok(A)  ──> Authorized<A>
//!                                                                       └─> Err(A::Denial)
//! ```
//!
//! The rules live with their tool (`tools/http/authorize.rs` for a request and for a
//! redirect hop, `tools/ssh/authorize.rs`, `tools/inventory/`); this module only wraps
//! what they allow. Nothing here reads a secret, resolves a name or opens a socket.

use crate::policy::Policy;

/// Proof that the policy allowed the wrapped action. Only this module can build one.
#[derive(Debug)]
pub struct Authorized<A>(A);

impl<A> Authorized<A> {
    pub fn action(&self) -> &A {
        &self.0
    }
}

/// The rules that turn a call of type `C` into an action of this type, or refuse it.
/// An action type may be reached from several calls (an HTTP request, and a redirect
/// hop of an authorized one).
pub(crate) trait Rules<C>: Sized {
    type Denial;
    fn check(policy: &Policy, call: C) -> Result<Self, Self::Denial>;
}

/// The one constructor of [`Authorized`]: `call` through `A`'s rules.
pub(crate) fn authorize<A: Rules<C>, C>(policy: &Policy, call: C) -> Result<Authorized<A>, A::Denial> {
    A::check(policy, call).map(Authorized)
}
