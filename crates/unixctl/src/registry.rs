//! The table of control commands and the texts OVS's unixctl server answers with.
//!
//! The built-ins are OVS's: `list-commands` and `version`. Everything else, including `exit`,
//! is registered by the owner. Reply texts follow `lib/unixctl.c` of OVS (checked against
//! `ovsdb-server` 3.1 and `ovs-appctl` 3.1).

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, PoisonError, RwLock};

use crate::Error;

/// A command's implementation: the arguments (without the command name) in, the reply text out;
/// `Err` becomes a JSON-RPC error reply. Handlers run on the server's connection threads, several
/// at once; one that needs the main thread should send itself there (e.g. over a channel).
pub type Handler = dyn Fn(&[String]) -> Result<String, String> + Send + Sync;

/// The set of commands a [`crate::Server`] answers. Cloning gives another handle to the same
/// table, so commands can be registered before or after the server starts.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    version: String,
    commands: RwLock<BTreeMap<String, Command>>,
}

#[derive(Clone)]
struct Command {
    usage: String,
    min_args: usize,
    max_args: usize,
    action: Action,
}

#[derive(Clone)]
enum Action {
    ListCommands,
    Version,
    Handler(Arc<Handler>),
}

impl Registry {
    /// A registry holding the built-ins `list-commands` and `version`; `version` answers
    /// `version` (OVS programs answer e.g. `ovsdb-server (Open vSwitch) 3.1.0`).
    pub fn new(version: impl Into<String>) -> Self {
        let builtin = |action| Command {
            usage: String::new(),
            min_args: 0,
            max_args: 0,
            action,
        };
        let commands = BTreeMap::from([
            ("list-commands".to_string(), builtin(Action::ListCommands)),
            ("version".to_string(), builtin(Action::Version)),
        ]);
        Registry {
            inner: Arc::new(Inner {
                version: version.into(),
                commands: RwLock::new(commands),
            }),
        }
    }

    /// Adds command `name` taking between `min_args` and `max_args` arguments (use `usize::MAX`
    /// for no upper bound). `usage` describes the arguments in `list-commands`, e.g.
    /// `"[dp] [-m]"`.
    pub fn register<F>(
        &self,
        name: &str,
        usage: &str,
        min_args: usize,
        max_args: usize,
        handler: F,
    ) -> Result<(), Error>
    where
        F: Fn(&[String]) -> Result<String, String> + Send + Sync + 'static,
    {
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::InvalidCommandName(name.to_string()));
        }
        if min_args > max_args {
            return Err(Error::InvalidArgRange {
                name: name.to_string(),
                min: min_args,
                max: max_args,
            });
        }
        let mut commands = self.write();
        if commands.contains_key(name) {
            return Err(Error::DuplicateCommand(name.to_string()));
        }
        commands.insert(
            name.to_string(),
            Command {
                usage: usage.to_string(),
                min_args,
                max_args,
                action: Action::Handler(Arc::new(handler)),
            },
        );
        Ok(())
    }

    /// Whether a command of that name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// The names of all commands, sorted bytewise as `list-commands` shows them.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Runs a command in this process, with the checks and the reply text a client of the
    /// server would get (including the trailing newline OVS adds).
    pub fn dispatch<S: AsRef<str>>(&self, method: &str, args: &[S]) -> Result<String, String> {
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
        self.execute(method, args.len(), || Some(args))
    }

    /// Runs `method` for a request whose parameters are JSON values. The checks come in OVS's
    /// order: unknown command, too few, too many, then non-string arguments.
    pub(crate) fn execute_json(
        &self,
        method: &str,
        params: &[serde_json::Value],
    ) -> Result<String, String> {
        self.execute(method, params.len(), || {
            params
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect()
        })
    }

    fn execute(
        &self,
        method: &str,
        argc: usize,
        args: impl FnOnce() -> Option<Vec<String>>,
    ) -> Result<String, String> {
        // Clone the entry so that the lock is not held while the handler runs (a handler may
        // register commands, and `list-commands` reads the table).
        let command = self.read().get(method).cloned();
        let outcome = match command {
            None => Err(format!(
                "\"{method}\" is not a valid command (use \"list-commands\" to see a list of \
                 valid commands)"
            )),
            Some(c) if argc < c.min_args => Err(format!(
                "\"{method}\" command requires at least {} arguments",
                c.min_args
            )),
            Some(c) if argc > c.max_args => Err(format!(
                "\"{method}\" command takes at most {} arguments",
                c.max_args
            )),
            Some(c) => match args() {
                None => Err(format!("\"{method}\" command has non-string argument")),
                Some(args) => self.run(method, &c.action, &args),
            },
        };
        match outcome {
            Ok(text) => Ok(with_newline(text)),
            Err(text) => Err(with_newline(text)),
        }
    }

    fn run(&self, method: &str, action: &Action, args: &[String]) -> Result<String, String> {
        match action {
            Action::ListCommands => Ok(self.list_commands()),
            Action::Version => Ok(self.inner.version.clone()),
            // A panicking handler must not take the connection thread down with it.
            Action::Handler(h) => catch_unwind(AssertUnwindSafe(|| h(args))).unwrap_or_else(|_| {
                Err(format!(
                    "\"{method}\" command failed: internal error (handler panicked)"
                ))
            }),
        }
    }

    /// The `list-commands` text: a header line, then one line per command in bytewise order,
    /// two spaces, the name left-aligned in 23 columns, a space and the usage (OVS's layout,
    /// trailing space included when the usage is empty).
    pub fn list_commands(&self) -> String {
        let mut out = String::from("The available commands are:\n");
        for (name, command) in self.read().iter() {
            out.push_str(&format!("  {name:<23} {}\n", command.usage));
        }
        out
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Command>> {
        self.inner
            .commands
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Command>> {
        self.inner
            .commands
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("version", &self.inner.version)
            .field("commands", &self.names())
            .finish()
    }
}

/// OVS appends a newline to any non-empty reply that lacks one, so output ends cleanly.
fn with_newline(mut text: String) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let r = Registry::new("flowpath 0.1.0");
        r.register("echo", "[ARG]...", 0, usize::MAX, |a| Ok(a.join(" ")))
            .unwrap();
        r.register("fail", "", 0, 0, |_| Err("it failed".into()))
            .unwrap();
        r.register("two", "A [B]", 1, 2, |a| Ok(format!("{}\n", a.len())))
            .unwrap();
        r
    }

    #[test]
    fn dispatch_adds_newline_like_ovs() {
        let r = registry();
        assert_eq!(r.dispatch("echo", &["a", "b"]), Ok("a b\n".into()));
        assert_eq!(r.dispatch::<&str>("echo", &[]), Ok(String::new()));
        assert_eq!(r.dispatch("two", &["x"]), Ok("1\n".into()));
        assert_eq!(r.dispatch::<&str>("fail", &[]), Err("it failed\n".into()));
        assert_eq!(
            r.dispatch::<&str>("version", &[]),
            Ok("flowpath 0.1.0\n".into())
        );
    }

    #[test]
    fn ovs_error_texts() {
        let r = registry();
        assert_eq!(
            r.dispatch::<&str>("nosuch", &[]),
            Err(
                "\"nosuch\" is not a valid command (use \"list-commands\" to see a list of \
                 valid commands)\n"
                    .into()
            )
        );
        assert_eq!(
            r.dispatch::<&str>("two", &[]),
            Err("\"two\" command requires at least 1 arguments\n".into())
        );
        assert_eq!(
            r.dispatch("two", &["a", "b", "c"]),
            Err("\"two\" command takes at most 2 arguments\n".into())
        );
        assert_eq!(
            r.dispatch("version", &["x"]),
            Err("\"version\" command takes at most 0 arguments\n".into())
        );
        let params = [serde_json::Value::from("a"), serde_json::Value::from(1)];
        assert_eq!(
            r.execute_json("two", &params),
            Err("\"two\" command has non-string argument\n".into())
        );
        // Count is checked before types, as OVS does.
        let params = vec![serde_json::Value::from(1); 3];
        assert_eq!(
            r.execute_json("two", &params),
            Err("\"two\" command takes at most 2 arguments\n".into())
        );
    }

    #[test]
    fn list_commands_layout() {
        let r = registry();
        r.register("a-very-long-command-name/x", "ARG", 1, 1, |_| {
            Ok(String::new())
        })
        .unwrap();
        assert_eq!(
            r.list_commands(),
            "The available commands are:\n\
             \x20 a-very-long-command-name/x ARG\n\
             \x20 echo                    [ARG]...\n\
             \x20 fail                    \n\
             \x20 list-commands           \n\
             \x20 two                     A [B]\n\
             \x20 version                 \n"
        );
        assert_eq!(
            r.dispatch::<&str>("list-commands", &[]),
            Ok(r.list_commands())
        );
    }

    #[test]
    fn registration_errors() {
        let r = registry();
        assert!(matches!(
            r.register("echo", "", 0, 0, |_| Ok(String::new())),
            Err(Error::DuplicateCommand(n)) if n == "echo"
        ));
        assert!(matches!(
            r.register("list-commands", "", 0, 0, |_| Ok(String::new())),
            Err(Error::DuplicateCommand(_))
        ));
        assert!(matches!(
            r.register("", "", 0, 0, |_| Ok(String::new())),
            Err(Error::InvalidCommandName(_))
        ));
        assert!(matches!(
            r.register("a b", "", 0, 0, |_| Ok(String::new())),
            Err(Error::InvalidCommandName(_))
        ));
        assert!(matches!(
            r.register("x", "", 2, 1, |_| Ok(String::new())),
            Err(Error::InvalidArgRange { min: 2, max: 1, .. })
        ));
        assert!(!r.contains("x"));
    }

    #[test]
    fn handler_panic_becomes_error_reply() {
        let r = registry();
        r.register("boom", "", 0, 0, |_| panic!("boom")).unwrap();
        let err = r.dispatch::<&str>("boom", &[]).unwrap_err();
        assert!(err.contains("handler panicked"), "{err}");
        assert_eq!(r.dispatch("echo", &["still"]), Ok("still\n".into()));
    }

    #[test]
    fn handler_may_use_the_registry() {
        let r = registry();
        let inner = r.clone();
        r.register("names", "", 0, 0, move |_| Ok(inner.names().join(",")))
            .unwrap();
        assert_eq!(
            r.dispatch::<&str>("names", &[]),
            Ok("echo,fail,list-commands,names,two,version\n".into())
        );
    }
}
