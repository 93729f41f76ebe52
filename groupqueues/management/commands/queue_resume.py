from groupqueues import cli


class Command(cli.SetPausedCommand):
    help = "Resume paused queues GROUP/NAME …: claims hand out their messages again."
    paused = False
    verb = "Resumed"
