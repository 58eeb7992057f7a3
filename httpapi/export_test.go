package httpapi

// WriteIDs is writeIDs, for TestIDAnswerIsJSON.
var WriteIDs = writeIDs
