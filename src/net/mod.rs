//! Destinations: name resolution and the address checks every outgoing connection
//! passes (`dest`), and the classes of addresses those checks decide on (`class`).

mod class;
pub mod dest;
