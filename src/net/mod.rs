//! Destinations: name resolution and the address checks every outgoing connection
//! passes (`dest`).

pub mod dest;
