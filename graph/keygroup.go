package graph

// DefaultMaxParallelism is the number of key groups of a keyed operator unless
// its topology says otherwise. It bounds the operator's parallelism forever:
// state can be rescaled to any parallelism up to it.
const DefaultMaxParallelism = 128

// KeyGroup returns the key group, in [0, maxParallelism), that key belongs to.
// It is stable across releases: snapshots depend on it.
func KeyGroup(key string, maxParallelism int) int {
	return int(keyHash(key) % uint64(maxParallelism))
}

// shardOf is the shard of key within its key group: the hash's top bits,
// independent of the low bits that choose the group.
func shardOf(key string) int { return int(keyHash(key) >> 60) }

// keyHash is FNV-1a followed by a murmur3 finalizer, so that keys differing
// in their last byte spread over all groups. It takes a key's bytes too, as
// state shards store them.
func keyHash[K ~string | ~[]byte](key K) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// SubtaskForKeyGroup returns the subtask, in [0, parallelism), that owns key
// group kg.
func SubtaskForKeyGroup(kg, parallelism, maxParallelism int) int {
	return kg * parallelism / maxParallelism
}

// KeyGroupRange is the contiguous range [Start, End) of key groups owned by
// one subtask.
type KeyGroupRange struct{ Start, End int }

// Contains reports whether kg is in r.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// Len is the number of key groups in r.
func (r KeyGroupRange) Len() int { return r.End - r.Start }

// KeyGroupRangeFor returns the key groups owned by subtask of an operator with
// the given parallelism. It is the inverse of SubtaskForKeyGroup.
func KeyGroupRangeFor(subtask, parallelism, maxParallelism int) KeyGroupRange {
	return KeyGroupRange{
		Start: (subtask*maxParallelism + parallelism - 1) / parallelism,
		End:   ((subtask+1)*maxParallelism + parallelism - 1) / parallelism,
	}
}
