package storage

const crashChildEnv = "KFOLLOWER_STORAGE_CRASH_CHILD"

func crashChild() {}
