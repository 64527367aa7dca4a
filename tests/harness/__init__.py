"""What the tests share: a real tarsd in a subprocess, fake model servers on 127.0.0.1, a browser, an editor
that saves the way real ones do, and the environments the install tests run in."""
