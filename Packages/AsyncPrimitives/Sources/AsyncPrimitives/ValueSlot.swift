/// Room for one `Value` in a future, set once, whose layout does not depend on `Value`.
///
/// A future's value used to be a `Value?`. A future's last release runs the class's
/// unspecialised `deinit`, and destroying a `Value?` (or a struct holding one) there looked up
/// the metadata of `Optional<Value>` (and of that struct) at run time: a hash-table search of
/// about 320 instructions each, two per `FutureResult` and three per `Future`, a quarter of the
/// instructions of a chain link. This slot is three words and a flag, whatever `Value` is, so
/// destroying the state needs no lookup; the owner's `deinit` destroys the value through
/// `Value`'s own witnesses (``SlotWords/destroy(_:isSet:as:)``), which come with the class's own
/// metadata.
///
/// A value of at most three words, aligned to at most a word, is stored in place (as an
/// existential container does); a larger one in a heap box whose address is the first word.
///
/// Every access goes through the owner's lock (or its `deinit`), as the `Value?` did.
@usableFromInline
struct ValueSlot<Value: Sendable>: ~Copyable, Sendable {
    @usableFromInline var words: SlotWords.Words
    @usableFromInline var isSet: Bool

    @inlinable
    init() {
        words = (0, 0, 0)
        isSet = false
    }

    /// Stores `value`; the slot must be empty.
    @inlinable
    mutating func set(_ value: Value) {
        assert(!isSet, "ValueSlot set twice")
        SlotWords.initialize(&words, to: value)
        isSet = true
    }

    /// A copy of the value, if set.
    @inlinable
    var value: Value? {
        mutating get {
            guard isSet else { return nil }
            return SlotWords.copy(&words, as: Value.self)
        }
    }

    /// Destroys the value, if set, and empties the slot.
    ///
    /// An owner's unspecialised `deinit` must not call this: a method of a generic
    /// noncopyable struct receives the struct's metadata, which costs the very lookup the slot
    /// avoids. It calls ``SlotWords/destroy(_:isSet:as:)`` instead, which needs only `Value`'s.
    @inlinable
    mutating func destroy() {
        SlotWords.destroy(&words, isSet: &isSet, as: Value.self)
    }
}

/// The operations of ``ValueSlot`` as generic functions of `Value` alone (not of
/// `ValueSlot<Value>`), so that unspecialised code calls them without a metadata lookup.
@usableFromInline
enum SlotWords: Sendable {
    /// The room in place: three words, as in an existential container.
    @usableFromInline typealias Words = (UInt, UInt, UInt)

    /// Whether a `Value` is stored in place rather than in a heap box.
    @inlinable
    static func fitsInPlace<Value>(_: Value.Type) -> Bool {
        MemoryLayout<Value>.size <= MemoryLayout<Words>.size
            && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
    }

    /// Stores `value` in `words`, which hold none.
    @inlinable
    static func initialize<Value>(_ words: inout Words, to value: Value) {
        if fitsInPlace(Value.self) {
            withUnsafeMutableBytes(of: &words) { bytes in
                _ = bytes.baseAddress.unsafelyUnwrapped.initializeMemory(as: Value.self, to: value)
            }
        } else {
            let box = UnsafeMutablePointer<Value>.allocate(capacity: 1)
            box.initialize(to: value)
            words.0 = UInt(bitPattern: box)
        }
    }

    /// A copy of the value `words` hold.
    @inlinable
    static func copy<Value>(_ words: inout Words, as _: Value.Type) -> Value {
        if fitsInPlace(Value.self) {
            return withUnsafeMutableBytes(of: &words) { bytes in
                bytes.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: Value.self).pointee
            }
        }
        return UnsafeMutablePointer<Value>(bitPattern: words.0).unsafelyUnwrapped.pointee
    }

    /// Destroys the value `words` hold if `isSet`, and clears `isSet`.
    @inlinable
    static func destroy<Value>(_ words: inout Words, isSet: inout Bool, as _: Value.Type) {
        guard isSet else { return }
        isSet = false
        if fitsInPlace(Value.self) {
            withUnsafeMutableBytes(of: &words) { bytes in
                _ = bytes.baseAddress.unsafelyUnwrapped.assumingMemoryBound(to: Value.self).deinitialize(count: 1)
            }
        } else {
            let box = UnsafeMutablePointer<Value>(bitPattern: words.0).unsafelyUnwrapped
            box.deinitialize(count: 1)
            box.deallocate()
        }
    }
}
