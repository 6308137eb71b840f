package audit

// The tools retry only what wire.RetryAfterMetadata says a moving
// leadership explains, a few times (verify's leader stream five, the
// lineage walk four), each time after cluster.Backoff(ctx, attempt ×
// 200 ms) and a fresh Metadata answer; anything else is reported for that
// partition. A one-shot tool that waited out every error as the daemon does
// would hang on a misconfiguration instead of saying so.
