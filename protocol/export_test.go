package protocol

// FrameSlotsFit is frameSlotsFit, for the bound's test at its limit and one past it.
var FrameSlotsFit = frameSlotsFit
