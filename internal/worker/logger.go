package worker

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// asynqLogger adapts zerolog to asynq.Logger. Its warnings and errors are
// sampled: while Redis is away, each Asynq server of each lane logs an
// error every poll (about 230 lines in 30 s); the worker's own
// redisHealth says once that Redis is unreachable and once that it is back.
type asynqLogger struct{ l zerolog.Logger }

// asynqLogBurst lines at most every asynqLogPeriod pass the sampler.
const (
	asynqLogBurst  = 5
	asynqLogPeriod = 30 * time.Second
)

func newAsynqLogger(l zerolog.Logger) asynqLogger {
	burst := &zerolog.BurstSampler{Burst: asynqLogBurst, Period: asynqLogPeriod}
	return asynqLogger{l.Sample(zerolog.LevelSampler{WarnSampler: burst, ErrorSampler: burst})}
}

func (a asynqLogger) Debug(args ...any) { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }

// Fatal is not sampled (LevelSampler leaves it out): it ends the process.
func (a asynqLogger) Fatal(args ...any) { a.l.Fatal().Msg(fmt.Sprint(args...)) }
