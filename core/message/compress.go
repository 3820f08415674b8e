package message

// Compression types of a compressed body (SysFlagCompressed), in bits 8
// to 10 of the sysFlag, as RocketMQ's producers set them. The Go and C++
// clients, and the Java client unless told otherwise, set none (0), which
// means zlib.
const (
	SysFlagCompressionMask int32 = 0x7 << 8
	SysFlagCompressionLZ4  int32 = 0x1 << 8 // an LZ4 frame
	SysFlagCompressionZstd int32 = 0x2 << 8 // a zstd frame
	SysFlagCompressionZlib int32 = 0x3 << 8 // zlib, as with no type
)
