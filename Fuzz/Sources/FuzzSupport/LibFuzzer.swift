#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libFuzzer's entry point (`-sanitize=fuzzer` links it): runs the fuzzing loop with the
/// process's arguments and calls `callback` once per input.
@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process's arguments (`-max_total_time=30 CORPUS …`), handing each
/// input to `body`, and exits with libFuzzer's status.
///
/// SwiftPM links an executable target with its own `main` (the module's `@main`), so the fuzz
/// targets cannot use the `main` that libFuzzer ships; they start the driver from their `@main`.
/// - Parameter body: Checks one input; a contract violation traps (`preconditionFailure`), which
///   libFuzzer reports as a crash and saves the input.
public func runLibFuzzer(_ body: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(llvmFuzzerRunDriver(&argc, &argv, body))
}

/// The bytes of one input (libFuzzer may pass no pointer for an empty input).
public func inputBytes(_ start: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
    guard let start, count > 0 else { return [] }
    return [UInt8](UnsafeBufferPointer(start: start, count: count))
}
