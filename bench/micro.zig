pub fn main() void {}
