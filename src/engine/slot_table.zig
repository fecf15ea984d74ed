//! The connection slots of an event-loop engine (`epoll`, `io_uring`): a fixed array sized for
//! `connections_max` at start-up and touched lazily (only slots ever used become resident), a
//! free list, and a generation per slot so that an event for a previous occupant is
//! recognised. Admission is here too: a connection over the server-wide `connections_max`, or
//! one this thread has no slot for, gets the 503 of `engine.refuse`, the same on every engine.
const std = @import("std");
const assert = std.debug.assert;
const linux = std.os.linux;
const engine = @import("../engine.zig");
const mapped = @import("../mapped.zig");

/// `Slot` must have the fields `in_use: bool`, `next_free: u32` and an unsigned
/// `generation`.
pub fn SlotTable(comptime Slot: type) type {
    comptime {
        assert(@FieldType(Slot, "in_use") == bool);
        assert(@FieldType(Slot, "next_free") == u32);
        assert(@typeInfo(@FieldType(Slot, "generation")).int.signedness == .unsigned);
    }
    return struct {
        const Table = @This();

        slots: []Slot,
        /// Slots used at least once; the rest have never been touched.
        touched: u32 = 0,
        /// Head of the free list (`none` when empty).
        free: u32 = none,
        /// Slots in use.
        active: u32 = 0,

        pub const none = std.math.maxInt(u32);

        /// Reserves room for `capacity` slots (address space; pages become resident as slots
        /// are first used).
        pub fn init(capacity: u32) error{OutOfMemory}!Table {
            return .{ .slots = try mapped.alloc(Slot, capacity) };
        }

        /// Asserts no slot is in use, unless `abandoned` (a handler thread still holds one:
        /// the memory is left to the process exit).
        pub fn deinit(table: *Table, abandoned: bool) void {
            if (abandoned) return;
            assert(table.active == 0);
            mapped.free(table.slots);
            table.* = undefined;
        }

        /// Admits a connection that `accept` returned: counts it server-wide and gives it a
        /// slot, or answers 503 (a FIN alone `over_tls`) and closes `fd` (null).
        pub fn admit(table: *Table, control: *engine.Control, fd: linux.fd_t, over_tls: bool) ?*Slot {
            if (!control.admit()) {
                engine.refuse(over_tls, fd);
                return null;
            }
            return table.take() orelse {
                control.release();
                engine.refuse(over_tls, fd);
                return null;
            };
        }

        fn take(table: *Table) ?*Slot {
            const slot = if (table.free != none) blk: {
                const slot = &table.slots[table.free];
                table.free = slot.next_free;
                break :blk slot;
            } else blk: {
                if (table.touched == table.slots.len) return null;
                const slot = &table.slots[table.touched];
                slot.generation = 0;
                table.touched += 1;
                break :blk slot;
            };
            assert(!slot.in_use);
            slot.in_use = true;
            slot.generation +%= 1;
            table.active += 1;
            return slot;
        }

        /// Frees a slot whose connection is closed, and uncounts it server-wide.
        pub fn release(table: *Table, control: *engine.Control, slot: *Slot) void {
            assert(slot.in_use);
            assert(table.active > 0);
            slot.in_use = false;
            slot.next_free = table.free;
            table.free = table.index(slot);
            table.active -= 1;
            control.release();
        }

        pub fn index(table: *const Table, slot: *const Slot) u32 {
            const i: u32 = @intCast(slot - table.slots.ptr);
            assert(i < table.touched);
            return i;
        }

        /// The slots that may be in use (check `in_use`).
        pub fn touchedSlots(table: *const Table) []Slot {
            return table.slots[0..table.touched];
        }
    };
}

test "SlotTable: reuses freed slots with a new generation and refuses beyond capacity" {
    const Slot = struct { in_use: bool, next_free: u32, generation: u24 };
    var control: engine.Control = try .init(.{ .connections_max = 10, .shutdown_timeout_ms = 1 });
    defer control.deinit();
    var table: SlotTable(Slot) = try .init(2);
    const a = table.take().?;
    const b = table.take().?;
    try std.testing.expect(a != b);
    try std.testing.expectEqual(@as(?*Slot, null), table.take());
    try std.testing.expect(control.admit());
    const generation = a.generation;
    table.release(&control, a);
    const c = table.take().?;
    try std.testing.expectEqual(a, c);
    try std.testing.expectEqual(generation +% 1, c.generation);
    try std.testing.expect(control.admit());
    table.release(&control, b);
    try std.testing.expect(control.admit());
    table.release(&control, c);
    // Both are free: both can be taken again, and they are distinct.
    const d = table.take().?;
    const e = table.take().?;
    try std.testing.expect(d != e);
    try std.testing.expectEqual(@as(?*Slot, null), table.take());
    for ([_]*Slot{ d, e }) |slot| {
        try std.testing.expect(control.admit());
        table.release(&control, slot);
    }
    try std.testing.expectEqual(@as(u32, 0), table.active);
    try std.testing.expectEqual(@as(u32, 2), table.touched);
    table.deinit(false);
}
