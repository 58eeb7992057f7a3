package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/seqkeeper/seqkeeper/internal/host"
	"github.com/seqkeeper/seqkeeper/internal/suggest"

	"github.com/seqkeeper/seqkeeper/internal/seqzk"
	"github.com/seqkeeper/seqkeeper/persist"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/seqkeeper/seqkeeper/config"
	"github.com/seqkeeper/seqkeeper/sequence"
	"github.com/seqkeeper/seqkeeper/zkclient"
)

// globalSettings are the settings every command takes as flags: the
// connection and the root's znodes, so that a serve command line works for
// an operator command too. The others are set in the config file or the
// environment, or bound by the commands that use them.
var globalSettings = []string{"zk", "root", "election_path", "marker_path", "zk_session_timeout", "zk_connect_timeout", "zk_tls", "zk_tls_ca_file", "zk_tls_cert_file", "zk_tls_key_file", "zk_tls_server_name", "store", "log_level"}

// serveSettings are the settings serve takes as flags of its own, as
// docs/cli.md lists them. zk_digest has no flag: a flag shows in the
// process list.
var serveSettings = []string{
	"log_format",
	"http", "http_token", "http_token_file", "http_admin_token", "http_admin_token_file", "ceiling_wait", "runway", "min_reserve",
	"max_reserve", "sweep_interval", "audit_interval", "id", "advertise", "allow_standalone_zookeeper",
	"create_bucket", "http_tls_cert_file", "http_tls_key_file", "http_tls_client_ca_file", "shutdown_delay",
	"metrics_top_sequences", "crash_probe", "zk_acl_admin", "zk_acl_replica", "zk_acl_worker", "zk_acl_reader",
}

// Output formats of -o.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// envOutput is the environment variable of -o.
const envOutput = "SEQKEEPER_OUTPUT"

// annotationNoConfig marks commands that run without a configuration.
const annotationNoConfig = "seqkeeper/no-config"

// globals is what every command shares: the global flags, the process's
// standard streams, environment and store reader (tests replace them), and
// the configuration resolved before a command runs. A command gets through
// it the resolved and validated configuration (g.cfg, set before its RunE
// runs), g.logger, dialZK, newSequenceClient, g.bindSettings for its
// own setting flags, and g.stdout/g.stderr.
type globals struct {
	configPath string
	output     string
	rootName   string // --root-name: one root of the config file's roots: list
	allRoots   bool   // --all-roots: every root of it, one at a time (allroots.go)
	settings   config.Flags

	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	lookupEnv func(string) (string, bool)

	// storeCeiling reads a sequence's stored ceiling for describe (tests
	// replace it).
	storeCeiling storeCeilingFunc

	// cfg is the resolved, validated configuration; set by load before a
	// command that needs it runs. With --all-roots, all is the whole of
	// it and cfg one root's at a time.
	cfg, all *config.Config
}

// defaultGlobals is the real process's globals.
func defaultGlobals() *globals {
	return &globals{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv,
		storeCeiling: storeCeiling,
	}
}

// run executes the command line args and returns the exit code (see
// exitCode). Errors go to g.stderr.
func run(ctx context.Context, g *globals, args []string) int {
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	msg := err.Error()
	var unknown *seqzk.UnknownSequenceError
	if errors.As(err, &unknown) && g.cfg != nil {
		if hint := g.unknownHint(ctx, unknown.Name); hint != "" {
			msg += "; " + hint
		}
	}
	if errors.Is(err, zkclient.ErrNoAuth) {
		msg += "; ZooKeeper refused this identity: the root's ACL layout ('seqkeeper acl show', docs/security.md) gives each role its powers " +
			"(a worker takes, pushes and registers; deleting a sequence needs the replica or admin role, changing ACLs the admin's); run the command as an identity whose role has this one (zk_tls_cert_file, zk_digest)"
	}
	fmt.Fprintln(g.stderr, "seqkeeper:", msg)
	return exitCode(err)
}

// flagError adds to an unknown flag's error the flags of cmd it is close
// to.
func flagError(cmd *cobra.Command, err error) error {
	bad, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if hint := suggest.Phrase(suggest.Closest(bad, names), func(s string) string { return "--" + s }); hint != "" {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}

// unknownHint says what to do about a sequence that does not exist (see
// seqzk.Operator.Hint), on a connection of its own: the command's is closed
// by now. "" when ZooKeeper cannot be reached quickly.
func (g *globals) unknownHint(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	zc, seqs, err := g.connect(ctx)
	if err != nil {
		return ""
	}
	defer zc.Close()
	return seqs.Operator().Hint(ctx, name)
}

// usageError marks errors caused by how the command was called (bad flags,
// bad config, bad arguments); they exit with code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitCode maps an error to the process's exit code. Bad input (a bad
// name, a bad or refused range, a bad configuration) is a usage error: the
// operator must change the command line, not retry it.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case onlyLost(err):
		return 3
	case errors.As(err, &ue), errors.Is(err, config.ErrInvalid),
		errors.Is(err, sequence.ErrInvalidName), errors.Is(err, sequence.ErrBadPush),
		errors.Is(err, seqzk.ErrAdvanceRefused), errors.Is(err, seqzk.ErrWidenRefused), errors.Is(err, seqzk.ErrClaimed), errors.Is(err, persist.ErrOtherRoot),
		errors.Is(err, zkclient.ErrNoAuth):
		return 2
	}
	return 1
}

// usageArgs turns an argument validator's errors into usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &usageError{fmt.Errorf("%w; see 'seqkeeper %s --help'", err, cmd.Name())}
		}
		return nil
	}
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "seqkeeper",
		Short: "Unique integer ID sequences on ZooKeeper that survive ZooKeeper data loss",
		Long: `seqkeeper hands out unique integer IDs from named sequences kept in ZooKeeper,
and keeps every ID ever handed out below a ceiling recorded in a durable store,
so that IDs stay unique even when ZooKeeper loses its data.

Settings come from flags, then SEQKEEPER_* environment variables, then the
--config file, then the defaults (docs/cli.md lists them all).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{annotationNoConfig: "true"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q; run 'seqkeeper --help' for the commands", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(g.stderr)
			_ = cmd.Help()
			return usagef("no command given")
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Annotations[annotationNoConfig] != "" || needsNoConfig(cmd) {
				return nil
			}
			return g.load(cmd)
		},
	}
	// Shell completion (bash, zsh, fish, powershell) and --version need no
	// configuration.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.Version = buildVersion()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{flagError(cmd, err)} })

	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "YAML config file with the same settings as the flags (env "+config.EnvConfigFile+")")
	pf.StringVarP(&g.output, "output", "o", "", "output format: text, json or yaml (env "+envOutput+"; default text)")
	pf.StringVar(&g.rootName, "root-name", "", "the root of the config file's roots: list to work on, by its name (env "+envRootName+")")
	pf.BoolVar(&g.allRoots, "all-roots", false, "run verify, list, leader, status or acl show once per root of the config file's roots: list")
	g.settings.Add(pf, globalSettings...)

	root.AddCommand(commands(g)...)
	root.SetOut(g.stdout) // before the completion commands capture it
	root.SetErr(g.stderr)
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		// cobra's own prints its help and exits 0 for a shell it does not
		// know (tcsh): say so, as a usage error.
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("completion: name a shell: bash, zsh, fish or powershell")
			}
			return usagef("completion: no completion for %q: seqkeeper completes bash, zsh, fish and powershell", args[0])
		}
	}
	return root
}

// needsNoConfig reports whether cmd is one of cobra's own commands (help,
// completion and its shells, the hidden __complete), which run without
// configuration.
func needsNoConfig(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		switch c.Name() {
		case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			return true
		}
	}
	return false
}

// load resolves the configuration (defaults < file < env < flags),
// validates it and the output format, narrows it to the root cmd works
// on (selectRoot: --root-name) and stores it in g.cfg.
func (g *globals) load(cmd *cobra.Command) error {
	path := g.configPath
	if path == "" {
		path, _ = g.lookupEnv(config.EnvConfigFile)
	}
	from := g.resolveRootName()
	if from != "" {
		if err := g.checkRootName(cmd, from); err != nil {
			return err
		}
	}
	cfg, err := config.Resolve(path, g.lookupEnv, &g.settings)
	if err != nil {
		return &usageError{err}
	}
	if err := g.resolveOutput(); err != nil {
		return err
	}
	if g.allRoots {
		if err := g.checkAllRoots(cmd, cfg, from); err != nil {
			return err
		}
		g.all, g.cfg = cfg, cfg.ForRoot(cfg.RootNames()[0])
		return nil
	}
	if cfg, err = g.selectRoot(cmd, cfg, from); err != nil {
		return err
	}
	g.cfg = cfg
	return nil
}

// resolveOutput settles the output format: -o, else $SEQKEEPER_OUTPUT,
// else text.
func (g *globals) resolveOutput() error {
	if g.output == "" {
		g.output, _ = g.lookupEnv(envOutput)
	}
	switch g.output {
	case "":
		g.output = outputText
	case outputText, outputJSON, outputYAML:
	default:
		return usagef("-o %q: want text, json or yaml", g.output)
	}
	return nil
}

// bindSettings adds flags for configuration settings (config.Keys) to a
// command; their values override the environment and the file.
func (g *globals) bindSettings(cmd *cobra.Command, keys ...string) {
	g.settings.Add(cmd.Flags(), keys...)
}

// logTimeFormat is RFC 3339 with milliseconds, in every log format.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// zerolog's time format is global: set once, before any logger exists
// (setting it in logger would race between parallel tests).
func init() { zerolog.TimeFieldFormat = logTimeFormat }

// logger returns the process logger: JSON lines on stderr, or console
// lines when stderr is a terminal (log_format auto), at the configured
// level or def when none is configured. Settings are never logged raw:
// log g.cfg.String(), which redacts secrets.
func (g *globals) logger(def zerolog.Level) zerolog.Logger {
	var out io.Writer = g.stderr
	format := config.DefaultLogFormat
	level := def
	if g.cfg != nil {
		format, level = g.cfg.LogFormat, g.cfg.Level(def)
	}
	if format == config.LogFormatConsole || (format == config.LogFormatAuto && isTerminal(g.stderr)) {
		out = zerolog.ConsoleWriter{Out: g.stderr, TimeFormat: logTimeFormat}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// dialZK opens the process's ZooKeeper session with the configured servers,
// timeouts and credentials, waiting up to zk_connect_timeout, or
// config.DefaultCLIZKConnectTimeout where that is 0 (serve passes its own
// longer default through dialZKWithin).
func dialZK(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*zkclient.Client, error) {
	return dialZKWithin(ctx, cfg, config.DefaultCLIZKConnectTimeout, log, nil)
}

// dialZKWithin is dialZK with def as the wait when zk_connect_timeout is 0,
// and observe (if not nil) timing every request.
func dialZKWithin(ctx context.Context, cfg *config.Config, def time.Duration, log zerolog.Logger, observe func(string, time.Duration)) (*zkclient.Client, error) {
	tc, err := cfg.ZKTLSConfig()
	if err != nil {
		return nil, err
	}
	ids, err := cfg.ZKIdentities()
	if err != nil {
		return nil, err
	}
	// The znodes this process creates are its identities' (all of them:
	// the certificate's and the digest's), as ZooKeeper's "auth" scheme
	// would give them.
	var acl []zkclient.ACL
	for _, id := range ids {
		acl = append(acl, zkclient.ACL{Perms: zkclient.PermAll, ID: id})
	}
	return zkclient.Dial(ctx, cfg.ZK, zkclient.Options{
		SessionTimeout: cfg.ZKSessionTimeout,
		ConnectTimeout: cfg.ConnectTimeout(def),
		ObserveRequest: observe,
		Digest:         cfg.ZKDigest.Reveal(),
		TLS:            tc,
		ACL:            acl,
		Logger:         &log,
	})
}

// newSequenceClient returns a sequence client with the operator's and the
// primary's powers for the configured root, creating znodes with the
// configured ACL layout when there is one (zk_acl_*).
func newSequenceClient(zc *zkclient.Client, cfg *config.Config) (*seqzk.Client, error) {
	layout, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	return seqzk.NewClient(zc, seqzk.Options{Root: cfg.Root, CeilingWait: cfg.CeilingWait, Layout: layout})
}

// cliLogLevel is the operator commands' log level when none is configured.
// It is error, not warn: a one-shot command's session ends with a
// "connection lost" warning that would follow every command's output.
const cliLogLevel = zerolog.ErrorLevel

// connect is dialZK and newSequenceClient for the operator commands, with
// the election and marker paths settled (host.SettlePaths). The caller closes
// the session.
func (g *globals) connect(ctx context.Context) (*zkclient.Client, *seqzk.Client, error) {
	zc, err := dialZK(ctx, g.cfg, g.logger(cliLogLevel))
	if err != nil {
		return nil, nil, err
	}
	seqs, err := newSequenceClient(zc, g.cfg)
	if err == nil {
		err = host.SettlePaths(ctx, g.cfg, seqs, g.logger(cliLogLevel))
	}
	if err != nil {
		zc.Close()
		return nil, nil, err
	}
	return zc, seqs, nil
}

// connectWithStore opens the store and then ZooKeeper, for the operator
// commands that write the store first (delete, advance, export, import).
// why completes "<command> needs the store ...: " when no store is
// configured; nothing is read or written before both are open.
func (g *globals) connectWithStore(ctx context.Context, command, why string, create bool) (*persist.Store, *zkclient.Client, *seqzk.Client, error) {
	if g.cfg.Store == "" {
		return nil, nil, nil, usagef("%s needs the store (--store, SEQKEEPER_STORE or 'store:' in the config file): %s", command, why)
	}
	store, err := openStore(ctx, g.cfg, create)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: open the store: %w; nothing was changed", command, err)
	}
	zc, seqs, err := g.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return store, zc, seqs, nil
}

// jsonOutput reports whether structured output (-o json or -o yaml) was
// asked for; printJSON writes it.
func (g *globals) jsonOutput() bool { return g.output == outputJSON || g.output == outputYAML }

// printJSON writes v as one line of JSON, or with -o yaml as a YAML
// document with the same keys in the same order (the JSON is read back as
// YAML, of which it is a subset, so the two never disagree).
func (g *globals) printJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if g.output != outputYAML {
		_, err = fmt.Fprintf(g.stdout, "%s\n", data)
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	clearStyle(&doc)
	enc := yaml.NewEncoder(g.stdout)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return enc.Close()
}

// clearStyle makes YAML read back from JSON print in block style, with
// strings quoted only where YAML needs it.
func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}

// nameArgs checks the arguments with v and the first as a sequence name;
// bad ones are usage errors.
func nameArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return usageArgs(func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return err
		}
		return sequence.ValidateName(args[0])
	})
}
