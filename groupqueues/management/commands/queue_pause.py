from groupqueues import cli


class Command(cli.SetPausedCommand):
    help = "Pause queues GROUP/NAME …: claims hand out nothing until resumed (enqueues still land)."
    paused = True
    verb = "Paused"
