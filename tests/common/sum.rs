//! A toy machine for the integrity tests: the state is a sum of positive
//! numbers, and `apply` refuses zero (leaving the state as it was).
use runlog::engine::Machine;

pub struct Sum;
#[derive(Debug)]
pub struct Zero;
impl std::fmt::Display for Zero {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("zero")
    }
}
impl std::error::Error for Zero {}
impl Machine for Sum {
    type State = u64;
    type Transition = u64;
    type Error = Zero;
    fn apply(s: &mut u64, t: &u64) -> Result<(), Zero> {
        if *t == 0 {
            return Err(Zero);
        }
        *s += t;
        Ok(())
    }
}
