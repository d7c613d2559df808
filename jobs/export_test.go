package jobs

// The key layout of Asynq v0.26, for the tests of other packages that put
// tasks in the shapes Asynq's bugs leave behind.
var (
	TaskKeyForTest      = taskKey
	PendingKeyForTest   = pendingKey
	ActiveKeyForTest    = activeKey
	LeaseKeyForTest     = leaseKey
	ScheduledKeyForTest = scheduledKey
	RetryKeyForTest     = retryKey
)
