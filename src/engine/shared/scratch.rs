//! The buffers an append batch encodes into, kept between batches so that a
//! writer's steady state allocates nothing.
//!
//! Its fields are its own. What it keeps: only capacity is carried from one
//! batch to the next; the frame buffer a batch takes is empty.

#[derive(Debug, Default)]
pub(crate) struct Scratch {
    payload: Vec<u8>,
    frame: Vec<u8>,
}

impl Scratch {
    /// Takes the buffers for one batch: one to encode each payload into, and
    /// one (empty) to frame the batch's records into.
    pub(crate) fn take(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut frame = std::mem::take(&mut self.frame);
        frame.clear();
        (std::mem::take(&mut self.payload), frame)
    }

    /// Hands the buffers back once the batch is written (or failed).
    pub(crate) fn give_back(&mut self, payload: Vec<u8>, frame: Vec<u8>) {
        self.payload = payload;
        self.frame = frame;
    }
}
