package worker

import (
	"fmt"

	"github.com/rs/zerolog"
)

// asynqLogger adapts zerolog to asynq.Logger.
type asynqLogger struct{ l zerolog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Fatal().Msg(fmt.Sprint(args...)) }
