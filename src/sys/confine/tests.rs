//! The launcher: its arguments, user lookup, program resolution, and what a confined
//! child can and cannot do (a real shell started through the `sp` built beside these
//! tests, as an upstream would be).
//!
//! Attacks tried against a confined child (each is a case below; all held):
//! - read a file outside the read set (a secret beside the policy) with `cat`: EACCES;
//! - list a directory outside it; write into a readable directory; create a file in
//!   `/tmp`: EACCES; write within `write`: allowed (the control);
//! - TCP connect to a loopback listener with `"network": false`: refused;
//! - read `/proc/<sp>/environ` and `/proc/<sp>/mem` of the process that started it
//!   (the test harness, not dumpable): refused by Landlock's ptrace rule, even as root;
//! - a core dump: RLIMIT_CORE is 0; setuid programs: no_new_privs is set;
//! - the controlling session: a session of its own (sid = its pid);
//! - signal the process that started it (`kill -0 <parent>`): refused (Landlock ABI 6);
//! - a launcher told to confine after an option that needs it: refused before exec.

use super::*;
use std::io::Read as _;
use std::process::Stdio;

fn plan_args(plan: &Plan, program: &str) -> Vec<OsString> {
    let cmd = launcher_command(program, Some(OsStr::new("/usr/bin:/bin")), plan).unwrap();
    cmd.get_args().skip(1).map(OsStr::to_owned).collect()
}

#[test]
fn the_launchers_arguments_carry_the_whole_plan() {
    let confine = Confinement {
        read: vec!["/srv/app".into(), "/odd path/with,comma".into()],
        write: vec!["/var/lib/x".into()],
        network: false,
        memory_bytes: 1 << 30,
        processes: 7,
        files: 99,
    };
    let plan = Plan { session: true, confine: Some(confine.clone()), user: None };
    let spec = parse(plan_args(&plan, "sh")).unwrap();
    let sh = resolve_program("sh", Some(OsStr::new("/usr/bin:/bin"))).unwrap();
    // The program itself is always readable: the launcher is told so after the policy's.
    let mut confine = confine;
    confine.read.push(sh.clone());
    assert_eq!(
        spec,
        Spec {
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            session: true,
            confine: Some(confine),
            uid: None,
            gid: None,
            groups: vec![],
            program: sh.into_os_string(),
            args: vec![],
        }
    );
    // Arguments after the program are the program's, even ones that look like options.
    let mut args = plan_args(&Plan::default(), "sh");
    args.extend(["--confine".into(), "-c".into()]);
    let spec = parse(args).unwrap();
    assert_eq!((spec.confine, spec.args), (None, vec![OsString::from("--confine"), OsString::from("-c")]));
    // Malformed launcher arguments are refused before anything runs.
    let bad = |a: &[&str]| parse(a.iter().map(OsString::from).collect()).unwrap_err();
    assert_eq!(bad(&["--parent", "1", "--read", "/x", "--", "/bin/sh"]), "--read before --confine");
    assert_eq!(bad(&["--parent", "1", "--no-network", "--", "/bin/sh"]), "--no-network before --confine");
    assert_eq!(bad(&["--parent", "x", "--", "/bin/sh"]), "--parent takes a number");
    assert_eq!(bad(&["--parent", "1", "--uid", "5", "--", "/bin/sh"]), "usage: sp __sp-exec --parent PID [options] -- PROGRAM [ARGS...]");
    assert_eq!(bad(&["--parent", "1"]), "usage: sp __sp-exec --parent PID [options] -- PROGRAM [ARGS...]");
    assert_eq!(bad(&["--parent", "1", "--bogus", "1", "--", "/bin/sh"]), "unknown option --bogus");
}

#[test]
fn users_come_from_passwd_and_group_and_root_is_refused() {
    let passwd = "root:x:0:0:root:/root:/bin/sh\nsvc:x:990:991::/nonexistent:/usr/sbin/nologin\nodd:x:abc:1::/:/bin/sh\n";
    let group = "svc:x:991:\nssl-cert:x:112:svc,other\nwheel:x:10:other\n";
    assert_eq!(user_from("svc", passwd, group), Ok(User { name: "svc".into(), uid: 990, gid: 991, groups: vec![991, 112] }));
    assert_eq!(user_from("root", passwd, group), Err("user \"root\" is root: an upstream never runs as root by choice".into()));
    assert_eq!(user_from("nobody2", passwd, group), Err("no user \"nobody2\" in /etc/passwd".into()));
    assert_eq!(user_from("odd", passwd, group), Err("/etc/passwd: odd's uid is not a number".into()));
}

#[test]
fn programs_resolve_like_execvp() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("tool");
    std::fs::write(&exe, "#!/bin/sh\n").unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("/nonexistent:{}", dir.path().display());
    assert_eq!(resolve_program("tool", Some(OsStr::new(&path))).unwrap(), exe);
    assert_eq!(resolve_program("tool", Some(OsStr::new("/nonexistent"))).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    assert_eq!(resolve_program(exe.to_str().unwrap(), None).unwrap(), exe);
    assert_eq!(resolve_program("/no/such/file", None).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    // Not executable (as root, access(X_OK) still wants an x bit for a regular file).
    assert!(resolve_program(plain.to_str().unwrap(), None).is_err());
    assert!(resolve_program("plain", Some(OsStr::new(&path))).is_err());
}

/// Runs `script` with `sh -c` confined as `c`; its exit status, stdout and stderr.
fn confined(c: Confinement, script: &str) -> (i32, String, String) {
    let plan = Plan { session: true, confine: Some(c), user: None };
    let mut cmd = launcher_command("sh", Some(OsStr::new("/usr/bin:/bin")), &plan).expect("a launcher: the sp built beside the tests");
    cmd.arg("-c").arg(script).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = super::super::Child::spawn_in_session(&mut cmd).unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = match child.wait_until(deadline, || false) {
        super::super::Waited::Exited(s) => s.code().unwrap_or(-1),
        other => panic!("waiting for the confined shell to exit: {other:?}"),
    };
    (status, out, err)
}

fn open_confinement() -> Confinement {
    Confinement { read: vec![], write: vec![], network: true, memory_bytes: 1 << 32, processes: 512, files: 1024 }
}

#[test]
fn a_confined_child_reads_and_writes_only_what_it_is_given() {
    if probe(true).is_err() {
        eprintln!("SKIPPED: this kernel has no Landlock");
        assert!(super::super::env_var("CI").is_none(), "CI machines have Landlock: the sandbox must be tested there");
        return;
    }
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("token");
    std::fs::write(&secret, "s3cr3t-value").unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("data"), "shared-data").unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut c = open_confinement();
    c.read.push(shared.path().to_path_buf());
    c.write.push(work.path().to_path_buf());
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let script = format!(
        "cat {secret} 2>/dev/null && echo READ-SECRET; \
         ls {secret_dir} >/dev/null 2>&1 && echo LISTED-SECRET-DIR; \
         cat {shared}/data; echo; \
         echo x > {shared}/new 2>/dev/null && echo WROTE-READ-ONLY; \
         echo x > /tmp/sp-confine-test-$$ 2>/dev/null && echo WROTE-TMP; \
         echo ok > {work}/out && cat {work}/out; \
         cat /proc/{me}/environ >/dev/null 2>&1 && echo READ-PARENT-ENVIRON; \
         head -c1 /proc/{me}/mem >/dev/null 2>&1 && echo READ-PARENT-MEM; \
         kill -0 {me} 2>/dev/null && echo SIGNALLED-PARENT; \
         echo core=$(ulimit -c); grep NoNewPrivs /proc/self/status; \
         echo sid=$(cut -d' ' -f6 /proc/self/stat) pid=$$",
        secret = secret.display(),
        secret_dir = secret_dir.path().display(),
        shared = shared.path().display(),
        work = work.path().display(),
    );
    let (status, out, err) = confined(c, &script);
    assert_eq!(status, 0, "stdout: {out}\nstderr: {err}");
    let lines: Vec<&str> = out.lines().collect();
    let pid = lines.last().and_then(|l| l.rsplit_once("pid=")).map(|(_, p)| p.to_owned()).unwrap();
    assert_eq!(lines, ["shared-data", "ok", "core=0", "NoNewPrivs:\t1", &format!("sid={pid} pid={pid}")], "stderr: {err}");
    assert!(!std::path::Path::new(&format!("/tmp/sp-confine-test-{pid}")).exists());
}

#[test]
fn network_false_refuses_tcp_even_to_loopback() {
    let mut c = open_confinement();
    c.network = false;
    if probe(false).is_err() {
        eprintln!("SKIPPED: this kernel cannot confine TCP with Landlock (Linux 6.7)");
        assert!(super::super::env_var("CI").is_none(), "CI machines have Landlock ABI 4");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // bash's /dev/tcp is a plain connect(2); the control run shows it works unconfined.
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
    let (_, out, _) = confined(open_confinement(), &format!("bash -c '{script}'"));
    assert_eq!(out.trim(), "CONNECTED", "the control: the same connect with the network allowed");
    let (_, out, err) = confined(c, &format!("bash -c '{script}'"));
    assert_eq!(out.trim(), "", "connected with \"network\": false; stderr: {err}");
    assert!(err.contains("Permission denied"), "{err}");
}

#[test]
fn a_path_the_policy_names_that_does_not_exist_fails_closed() {
    if probe(true).is_err() {
        return;
    }
    let mut c = open_confinement();
    c.read.push("/nonexistent/sp-confine-test".into());
    let (status, out, err) = confined(c, "echo RAN");
    assert_eq!((status, out.as_str()), (126, ""), "{err}");
    assert!(err.starts_with("sp launcher: /nonexistent/sp-confine-test: "), "{err}");
    assert!(err.trim_end().ends_with("; not started"), "{err}");
}

#[test]
fn making_the_process_undumpable_sticks() {
    make_undumpable().unwrap();
    assert_eq!(rustix::process::dumpable_behavior().unwrap(), rustix::process::DumpableBehavior::NotDumpable);
}
